//! Sans-IO Kafka exchange (work in progress).
