//! Virtual-time simulator (work in progress).
