//! The wasm-bindgen half: JS values, WebSockets, timers. Only built for `wasm32`.

mod api;
mod convert;
mod driver;

pub use api::{
    default_config, presets, refresh, validate_config, ConfigInput, MetadataPromise, PresetNames, RefreshConfigObject,
    RefreshOptions,
};
