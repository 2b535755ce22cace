//! The knob schema's machinery: what a knob is, how its text is read and written.
//!
//! The table itself is `KNOBS` in `table.rs`, next to the config structs it describes; this module
//! only knows how to find a row, parse a value into the field the row points at, and print
//! a field back. Everything is `&'static` and `Copy`: listing the schema allocates nothing.

use alloc::format;
use alloc::string::String;
use core::fmt;
use core::time::Duration;
use serde::ser::SerializeStruct;
use serde::{Serialize, Serializer};

use super::table::KNOBS;
use super::{Adaptive, ClusterConfig, Growth, RefreshConfig, Stagger};
use crate::error::ConfigError;

/// Which struct a knob belongs to: every [`crate::Refresh`] reads [`KnobScope::Refresh`] knobs;
/// only a long-lived [`crate::Cluster`] reads [`KnobScope::Cluster`] ones.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum KnobScope {
    /// A field of [`RefreshConfig`] (in a [`ClusterConfig`]'s JSON, under `refresh.`).
    Refresh,
    /// A field of [`ClusterConfig`] only.
    Cluster,
}

/// What values a knob takes, so a UI can pick an input and a parser.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum KnobKind {
    /// A duration: `250ms`, `1.5s`, `10s`, `1m30s` (serde: `{secs, nanos}`).
    Duration,
    /// A whole number up to `u32::MAX` (`max`).
    U32,
    /// A whole number up to `u64::MAX`.
    U64,
    /// A number.
    F64,
    /// `true` or `false`.
    Bool,
    /// One of a few variants, some with a parameter: `name` or `name:param`.
    Choice {
        /// The variants, in the order UIs offer them.
        choices: &'static [KnobChoice],
    },
}

/// One variant of a [`KnobKind::Choice`] knob (serde: an enum variant of that name).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct KnobChoice {
    /// The variant, as written in text and in serde JSON (`fixed`, `linear`).
    pub name: &'static str,
    /// Its parameter's kind, written after a colon (`fixed:100ms`), if it has one.
    pub param: Option<KnobKind>,
}

impl KnobKind {
    /// How a value is written, for help texts and errors: `DURATION`, `N`,
    /// `adaptive|fixed:DURATION`.
    pub fn syntax(&self) -> String {
        match self {
            KnobKind::Duration => "DURATION".into(),
            KnobKind::U32 | KnobKind::U64 => "N".into(),
            KnobKind::F64 => "X".into(),
            KnobKind::Bool => "true|false".into(),
            KnobKind::Choice { choices } => {
                let mut out = String::new();
                for (i, c) in choices.iter().enumerate() {
                    if i > 0 {
                        out.push('|');
                    }
                    out.push_str(c.name);
                    if let Some(p) = c.param {
                        out.push(':');
                        out.push_str(&p.syntax());
                    }
                }
                out
            }
        }
    }
}

/// One knob: a leaf of the config's serde JSON, described for CLIs, type checks and UIs.
#[derive(Clone, Copy)]
pub struct Knob {
    /// Dotted path in the owning struct's serde JSON (`fanout.tuning.spread_ticks`), also
    /// the name [`ConfigError::field`] uses.
    pub path: &'static str,
    /// What values it takes.
    pub kind: KnobKind,
    /// One line: what it does (the field's doc comment has the why and the default's source).
    pub doc: &'static str,
    pub(super) access: Access,
}

/// Where a knob lives: a function from the owning struct to the knob's field.
#[derive(Clone, Copy)]
pub(super) enum Access {
    Refresh(fn(&mut RefreshConfig) -> Option<Slot<'_>>),
    Cluster(fn(&mut ClusterConfig) -> Option<Slot<'_>>),
}

/// A borrowed field of one of the knob kinds.
pub(super) enum Slot<'a> {
    Duration(&'a mut Duration),
    U32(&'a mut u32),
    U64(&'a mut u64),
    F64(&'a mut f64),
    Bool(&'a mut bool),
    Stagger(&'a mut Stagger),
    Growth(&'a mut Growth),
}

/// A knob's value, as [`RefreshConfig::get`] reads it. `Display` writes the text that
/// `set` reads back; `Serialize` writes what the field's own serde would.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum KnobValue {
    /// A duration knob.
    Duration(Duration),
    /// A `u32` knob.
    U32(u32),
    /// A `u64` knob.
    U64(u64),
    /// An `f64` knob.
    F64(f64),
    /// A switch.
    Bool(bool),
    /// `fanout.stagger`.
    Stagger(Stagger),
    /// `fanout.growth`.
    Growth(Growth),
}

impl Knob {
    /// A row for a [`RefreshConfig`] field.
    pub(super) const fn refresh(
        path: &'static str,
        kind: KnobKind,
        doc: &'static str,
        access: fn(&mut RefreshConfig) -> Option<Slot<'_>>,
    ) -> Self {
        Knob { path, kind, doc, access: Access::Refresh(access) }
    }

    /// A row for a [`ClusterConfig`]-only field.
    pub(super) const fn cluster(
        path: &'static str,
        kind: KnobKind,
        doc: &'static str,
        access: fn(&mut ClusterConfig) -> Option<Slot<'_>>,
    ) -> Self {
        Knob { path, kind, doc, access: Access::Cluster(access) }
    }

    /// Which struct the knob belongs to.
    pub fn scope(&self) -> KnobScope {
        match self.access {
            Access::Refresh(_) => KnobScope::Refresh,
            Access::Cluster(_) => KnobScope::Cluster,
        }
    }

    /// The knob's value in `ClusterConfig::default()` (whose refresh is
    /// `RefreshConfig::default()`): the default a UI shows.
    pub fn default_value(&self) -> Option<KnobValue> {
        ClusterConfig::default().get(self.path)
    }

    /// Parses `text` into the field `slot` (this knob's field in some config, `None` where
    /// the knob does not apply).
    pub(super) fn write(&self, slot: Option<Slot<'_>>, text: &str) -> Result<(), ConfigError> {
        let text = text.trim();
        let bad = |what: &str| ConfigError::new(self.path, format!("expects {what} (got {text:?})"));
        // Only the adaptive stagger's parameters can be absent (see `adaptive` in table.rs).
        let Some(slot) = slot else {
            return Err(ConfigError::new(self.path, "applies only while fanout.stagger is adaptive"));
        };
        match slot {
            Slot::Duration(d) => {
                *d = parse_duration(text).ok_or_else(|| bad("a duration such as 250ms, 1.5s or 10s"))?
            }
            Slot::U32(n) => *n = parse_u32(text).ok_or_else(|| bad("a whole number up to 4294967295, or max"))?,
            Slot::U64(n) => *n = text.parse().map_err(|_| bad("a whole number"))?,
            Slot::F64(x) => *x = text.parse().map_err(|_| bad("a number"))?,
            Slot::Bool(b) => *b = parse_bool(text).ok_or_else(|| bad("true or false"))?,
            Slot::Stagger(s) => {
                let expected = "adaptive or fixed:DURATION (e.g. fixed:100ms)";
                *s = match text.split_once(':') {
                    None if text == "adaptive" => match *s {
                        Stagger::Adaptive(a) => Stagger::Adaptive(a),
                        Stagger::Fixed(_) => Stagger::Adaptive(Adaptive::default()),
                    },
                    Some(("fixed", d)) => Stagger::Fixed(
                        parse_duration(d)
                            .ok_or_else(|| bad("fixed:DURATION, a duration such as 250ms, 1.5s or 10s"))?,
                    ),
                    _ => return Err(bad(expected)),
                }
            }
            Slot::Growth(g) => {
                let expected = "linear:N or exponential:F (e.g. linear:2)";
                *g = match text.split_once(':') {
                    Some(("linear", n)) => Growth::Linear(parse_u32(n).ok_or_else(|| bad(expected))?),
                    Some(("exponential" | "exp", f)) => Growth::Exponential(f.parse().map_err(|_| bad(expected))?),
                    _ => return Err(bad(expected)),
                }
            }
        }
        Ok(())
    }
}

impl fmt::Debug for Knob {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Knob")
            .field("path", &self.path)
            .field("scope", &self.scope())
            .field("kind", &self.kind)
            .finish_non_exhaustive()
    }
}

/// `{path, scope, kind, doc, default}`, `default` as text (what `set` reads): the schema a
/// web page or a type check reads.
impl Serialize for Knob {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut s = serializer.serialize_struct("Knob", 5)?;
        s.serialize_field("path", self.path)?;
        s.serialize_field("scope", &self.scope())?;
        s.serialize_field("kind", &self.kind)?;
        s.serialize_field("doc", self.doc)?;
        s.serialize_field("default", &self.default_value().map(|v| alloc::string::ToString::to_string(&v)))?;
        s.end()
    }
}

impl Slot<'_> {
    /// The field's current value.
    pub(super) fn value(&self) -> KnobValue {
        match self {
            Slot::Duration(d) => KnobValue::Duration(**d),
            Slot::U32(n) => KnobValue::U32(**n),
            Slot::U64(n) => KnobValue::U64(**n),
            Slot::F64(x) => KnobValue::F64(**x),
            Slot::Bool(b) => KnobValue::Bool(**b),
            Slot::Stagger(s) => KnobValue::Stagger(**s),
            Slot::Growth(g) => KnobValue::Growth(**g),
        }
    }
}

impl fmt::Display for KnobValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KnobValue::Duration(d) => write_duration(f, *d),
            KnobValue::U32(u32::MAX) => f.write_str("max"),
            KnobValue::U32(n) => write!(f, "{n}"),
            KnobValue::U64(n) => write!(f, "{n}"),
            KnobValue::F64(x) => write!(f, "{x}"),
            KnobValue::Bool(b) => write!(f, "{b}"),
            KnobValue::Stagger(Stagger::Adaptive(_)) => f.write_str("adaptive"),
            KnobValue::Stagger(Stagger::Fixed(d)) => {
                f.write_str("fixed:")?;
                write_duration(f, *d)
            }
            KnobValue::Growth(Growth::Linear(n)) => write!(f, "linear:{n}"),
            KnobValue::Growth(Growth::Exponential(x)) => write!(f, "exponential:{x}"),
        }
    }
}

/// The row for `path`, if code holding a config of `scope` may set it. A
/// [`KnobScope::Cluster`] holder may set every knob.
pub(super) fn find(path: &str, scope: KnobScope) -> Result<&'static Knob, ConfigError> {
    let knob = KNOBS
        .iter()
        .find(|k| k.path == path)
        .ok_or_else(|| ConfigError::new("knob", format!("`{path}` is not a knob (see stagger::knobs)")))?;
    if scope == KnobScope::Refresh && knob.scope() == KnobScope::Cluster {
        return Err(ConfigError::new(knob.path, "is a ClusterConfig knob: a lone refresh does not read it"));
    }
    Ok(knob)
}

/// Writes `d` in the largest unit that keeps it exact: `10s`, `250ms`, `1500us`, `7ns`.
fn write_duration(f: &mut fmt::Formatter<'_>, d: Duration) -> fmt::Result {
    let n = d.as_nanos();
    match n {
        0 => f.write_str("0s"),
        n if n % 1_000_000_000 == 0 => write!(f, "{}s", n / 1_000_000_000),
        n if n % 1_000_000 == 0 => write!(f, "{}ms", n / 1_000_000),
        n if n % 1_000 == 0 => write!(f, "{}us", n / 1_000),
        n => write!(f, "{n}ns"),
    }
}

/// Parses `250ms`, `1.5s`, `10s`, `1m30s`, `2h`, `100us`/`100µs`, `7ns`, or a bare `0`.
/// Decimal fractions are exact (no floating point): `0.1s` is 100 ms.
pub fn parse_duration(text: &str) -> Option<Duration> {
    match text {
        "0" => return Some(Duration::ZERO),
        "" => return None,
        _ => {}
    }
    let mut rest = text;
    let mut total: u128 = 0;
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(rest.len());
        let (number, after) = rest.split_at(digits);
        let letters = after.find(|c: char| !c.is_alphabetic()).unwrap_or(after.len());
        let (unit, after) = after.split_at(letters);
        let scale: u128 = match unit {
            "ns" => 1,
            "us" | "µs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" | "min" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            _ => return None,
        };
        let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
        if whole.is_empty() && fraction.is_empty() || fraction.contains('.') || fraction.len() > 18 {
            return None;
        }
        let whole: u128 = if whole.is_empty() { 0 } else { whole.parse().ok()? };
        let mut part = whole.checked_mul(scale)?;
        if !fraction.is_empty() {
            let denominator = 10u128.pow(fraction.len() as u32);
            part = part.checked_add(fraction.parse::<u128>().ok()?.checked_mul(scale)? / denominator)?;
        }
        total = total.checked_add(part)?;
        rest = after;
    }
    let secs = u64::try_from(total / 1_000_000_000).ok()?;
    Some(Duration::new(secs, (total % 1_000_000_000) as u32))
}

fn parse_u32(text: &str) -> Option<u32> {
    match text {
        "max" => Some(u32::MAX),
        _ => text.parse().ok(),
    }
}

fn parse_bool(text: &str) -> Option<bool> {
    match text {
        "true" | "on" | "yes" | "1" => Some(true),
        "false" | "off" | "no" | "0" => Some(false),
        _ => None,
    }
}

#[cfg(test)]
mod tests;
