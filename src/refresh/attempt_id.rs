//! [`AttemptId`]: the name of one attempt that adapters, traces and JavaScript share, and how
//! it is written and read (`{"epoch", "number"}`).

use core::fmt;
use serde::{Deserialize, Serialize};

/// Names one attempt (one connection to one broker) uniquely within a [`crate::Cluster`]:
/// the high 32 bits are the refresh's epoch, the low 32 bits the attempt's number in it.
///
/// Serialised as `{"epoch": e, "number": n}`, which JavaScript reads without losing
/// precision (a 64-bit integer does not fit its numbers), and read from that form only.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AttemptId(pub u64);

impl AttemptId {
    pub(super) fn new(epoch: u32, number: u32) -> Self {
        AttemptId(((epoch as u64) << 32) | number as u64)
    }
    /// The refresh this attempt belongs to.
    pub fn epoch(self) -> u32 {
        (self.0 >> 32) as u32
    }
    /// The attempt's number within its refresh, from 0.
    pub fn number(self) -> u32 {
        self.0 as u32
    }
}

impl Serialize for AttemptId {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut s = serializer.serialize_struct("AttemptId", 2)?;
        s.serialize_field("epoch", &self.epoch())?;
        s.serialize_field("number", &self.number())?;
        s.end()
    }
}

impl<'de> Deserialize<'de> for AttemptId {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(AttemptIdVisitor)
    }
}

/// Reads `{"epoch", "number"}`.
struct AttemptIdVisitor;

impl<'de> serde::de::Visitor<'de> for AttemptIdVisitor {
    type Value = AttemptId;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an attempt id: {\"epoch\": e, \"number\": n}")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<AttemptId, A::Error> {
        use serde::de::Error;
        let (mut epoch, mut number) = (None, None);
        while let Some(key) = map.next_key::<alloc::string::String>()? {
            match key.as_str() {
                "epoch" => epoch = Some(map.next_value::<u32>()?),
                "number" => number = Some(map.next_value::<u32>()?),
                _ => return Err(A::Error::unknown_field(&key, &["epoch", "number"])),
            }
        }
        let epoch = epoch.ok_or_else(|| A::Error::missing_field("epoch"))?;
        let number = number.ok_or_else(|| A::Error::missing_field("number"))?;
        Ok(AttemptId::new(epoch, number))
    }
}

impl fmt::Display for AttemptId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{}.{}", self.epoch(), self.number())
    }
}
