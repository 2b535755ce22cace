//! The wasm-bindgen half: JS values, WebSockets, timers. Only built for `wasm32`.

mod api;
mod convert;
mod driver;
mod from_js;
mod host;
mod to_js;

pub use api::{
    default_config, knobs, presets, refresh, refresh_with, validate_config, ConfigInput, KnobList, MetadataPromise,
    PresetNames, RefreshConfigObject, RefreshOptions, RefreshResultPromise,
};
