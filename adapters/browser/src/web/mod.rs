//! The wasm-bindgen half: JS values, WebSockets, timers. Only built for `wasm32`.

mod api;
mod convert;
mod driver;

pub use api::{
    default_config, knobs, presets, refresh, validate_config, ConfigInput, KnobList, MetadataPromise, PresetNames,
    RefreshConfigObject, RefreshOptions,
};
