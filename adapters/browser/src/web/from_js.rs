//! A serde `Deserializer` over a JS value: what reads a `RefreshConfig` object.
//!
//! Each request reads the value as what it asks for, or fails with serde's own "invalid
//! type" wording: `null`/`undefined` as unit and `None`, a boolean, a safe integer for the
//! integer types (serde's visitors check the range), any number for the float types, a
//! string, an array as a sequence, an object's own enumerable properties (`Object.entries`)
//! as a map or a struct, a string as a unit variant and `{ variant: payload }` as any
//! other. The derived `Deserialize` impls do the rest — defaults, field names, unknown
//! fields ignored — as with any other format. It reads only what a config holds: no
//! `BigInt`, typed arrays, `Map`s or iterables.

use js_sys::{Array, Number, Object};
use serde::de::{self, DeserializeOwned, Unexpected, Visitor};
use wasm_bindgen::{JsCast, JsValue};

use super::convert::SerdeError as Error;

/// Reads a `T` from a JS value.
pub(crate) fn from_js<T: DeserializeOwned>(value: JsValue) -> Result<T, Error> {
    T::deserialize(FromJs(value))
}

struct FromJs(JsValue);

/// What a JS value is, in serde's data model.
enum Shape {
    Unit,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    Seq(Array),
    Map(Array),
    /// A function, a symbol, a `BigInt`: nothing a config holds.
    Other,
}

impl FromJs {
    fn is_nullish(&self) -> bool {
        self.0.is_undefined() || self.0.is_null()
    }

    /// serde's "invalid type: …, expected …" for this value.
    fn invalid_type(&self, expected: &dyn de::Expected) -> Error {
        let text;
        let unexpected = match self.shape() {
            Shape::Unit => Unexpected::Unit,
            Shape::Bool(b) => Unexpected::Bool(b),
            Shape::Int(n) => Unexpected::Signed(n),
            Shape::Float(x) => Unexpected::Float(x),
            Shape::Str(s) => {
                text = s;
                Unexpected::Str(&text)
            }
            Shape::Seq(_) => Unexpected::Seq,
            Shape::Map(_) => Unexpected::Map,
            Shape::Other => Unexpected::Other("a JS value of another kind"),
        };
        de::Error::invalid_type(unexpected, expected)
    }

    /// What the value is. Not generic: one copy in the wasm, whatever the visitors.
    fn shape(&self) -> Shape {
        let value = &self.0;
        if self.is_nullish() {
            Shape::Unit
        } else if let Some(b) = value.as_bool() {
            Shape::Bool(b)
        } else if let Some(x) = value.as_f64() {
            if Number::is_safe_integer(value) {
                Shape::Int(x as i64)
            } else {
                Shape::Float(x)
            }
        } else if let Some(s) = value.as_string() {
            Shape::Str(s)
        } else if Array::is_array(value) {
            Shape::Seq(value.clone().unchecked_into())
        } else if value.is_object() && !value.is_function() {
            Shape::Map(Object::entries(value.unchecked_ref()))
        } else {
            Shape::Other
        }
    }
}

impl<'de> de::Deserializer<'de> for FromJs {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.shape() {
            Shape::Unit => visitor.visit_unit(),
            Shape::Bool(b) => visitor.visit_bool(b),
            Shape::Int(n) => visitor.visit_i64(n),
            Shape::Float(x) => visitor.visit_f64(x),
            Shape::Str(s) => visitor.visit_string(s),
            Shape::Seq(items) => visitor.visit_seq(Items { items, next: 0 }),
            Shape::Map(entries) => visitor.visit_map(Entries { entries, next: 0, value: None }),
            Shape::Other => Err(self.invalid_type(&visitor)),
        }
    }

    fn deserialize_bool<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.0.as_bool() {
            Some(b) => visitor.visit_bool(b),
            None => Err(self.invalid_type(&visitor)),
        }
    }

    fn deserialize_i64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.shape() {
            Shape::Int(n) => visitor.visit_i64(n),
            _ => Err(self.invalid_type(&visitor)),
        }
    }

    fn deserialize_u64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.shape() {
            Shape::Int(n) if n >= 0 => visitor.visit_u64(n as u64),
            _ => Err(self.invalid_type(&visitor)),
        }
    }

    fn deserialize_f64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.0.as_f64() {
            Some(x) => visitor.visit_f64(x),
            None => Err(self.invalid_type(&visitor)),
        }
    }

    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.0.as_string() {
            Some(s) => visitor.visit_string(s),
            None => Err(self.invalid_type(&visitor)),
        }
    }

    fn deserialize_unit<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        if self.is_nullish() {
            visitor.visit_unit()
        } else {
            Err(self.invalid_type(&visitor))
        }
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.shape() {
            Shape::Seq(items) => visitor.visit_seq(Items { items, next: 0 }),
            _ => Err(self.invalid_type(&visitor)),
        }
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.shape() {
            Shape::Map(entries) => visitor.visit_map(Entries { entries, next: 0, value: None }),
            _ => Err(self.invalid_type(&visitor)),
        }
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        if self.is_nullish() {
            visitor.visit_none()
        } else {
            visitor.visit_some(self)
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(self, _: &'static str, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _: &'static str,
        _: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        if self.0.is_string() {
            return visitor.visit_enum(Variant { tag: self.0, payload: JsValue::UNDEFINED });
        }
        match self.shape() {
            Shape::Map(entries) if entries.length() == 1 => {
                let entry: Array = entries.get(0).unchecked_into();
                visitor.visit_enum(Variant { tag: entry.get(0), payload: entry.get(1) })
            }
            Shape::Map(entries) => Err(de::Error::invalid_length(entries.length() as usize, &"1 variant")),
            _ => Err(self.invalid_type(&visitor)),
        }
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_unit()
    }

    // serde's visitors check the range of narrower integers and floats.
    fn deserialize_i8<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_i64(visitor)
    }
    fn deserialize_i16<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_i64(visitor)
    }
    fn deserialize_i32<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_i64(visitor)
    }
    fn deserialize_u8<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_u64(visitor)
    }
    fn deserialize_u16<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_u64(visitor)
    }
    fn deserialize_u32<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_u64(visitor)
    }
    fn deserialize_f32<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_f64(visitor)
    }
    fn deserialize_char<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_string(visitor)
    }
    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_string(visitor)
    }
    fn deserialize_identifier<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_string(visitor)
    }
    fn deserialize_bytes<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_seq(visitor)
    }
    fn deserialize_byte_buf<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_seq(visitor)
    }
    fn deserialize_unit_struct<V: Visitor<'de>>(self, _: &'static str, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_unit(visitor)
    }
    fn deserialize_tuple<V: Visitor<'de>>(self, _: usize, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_seq(visitor)
    }
    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        _: usize,
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.deserialize_seq(visitor)
    }
    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        _: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.deserialize_map(visitor)
    }
}

/// An array's items, in order.
struct Items {
    items: Array,
    next: u32,
}

impl<'de> de::SeqAccess<'de> for Items {
    type Error = Error;

    fn next_element_seed<T: de::DeserializeSeed<'de>>(&mut self, seed: T) -> Result<Option<T::Value>, Error> {
        if self.next >= self.items.length() {
            return Ok(None);
        }
        self.next += 1;
        seed.deserialize(FromJs(self.items.get(self.next - 1))).map(Some)
    }
}

/// An object's `[key, value]` entries, in `Object.entries` order.
struct Entries {
    entries: Array,
    next: u32,
    value: Option<JsValue>,
}

impl<'de> de::MapAccess<'de> for Entries {
    type Error = Error;

    fn next_key_seed<K: de::DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>, Error> {
        if self.next >= self.entries.length() {
            return Ok(None);
        }
        let entry: Array = self.entries.get(self.next).unchecked_into();
        self.next += 1;
        self.value = Some(entry.get(1));
        seed.deserialize(FromJs(entry.get(0))).map(Some)
    }

    fn next_value_seed<V: de::DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, Error> {
        seed.deserialize(FromJs(self.value.take().unwrap_or(JsValue::UNDEFINED)))
    }
}

/// An enum's variant name and its payload (`undefined` for a unit variant given as a string).
struct Variant {
    tag: JsValue,
    payload: JsValue,
}

impl<'de> de::EnumAccess<'de> for Variant {
    type Error = Error;
    type Variant = FromJs;

    fn variant_seed<V: de::DeserializeSeed<'de>>(self, seed: V) -> Result<(V::Value, FromJs), Error> {
        Ok((seed.deserialize(FromJs(self.tag))?, FromJs(self.payload)))
    }
}

impl<'de> de::VariantAccess<'de> for FromJs {
    type Error = Error;

    fn unit_variant(self) -> Result<(), Error> {
        de::Deserialize::deserialize(self)
    }

    fn newtype_variant_seed<T: de::DeserializeSeed<'de>>(self, seed: T) -> Result<T::Value, Error> {
        seed.deserialize(self)
    }

    fn tuple_variant<V: Visitor<'de>>(self, _: usize, visitor: V) -> Result<V::Value, Error> {
        de::Deserializer::deserialize_any(self, visitor)
    }

    fn struct_variant<V: Visitor<'de>>(self, _: &'static [&'static str], visitor: V) -> Result<V::Value, Error> {
        de::Deserializer::deserialize_any(self, visitor)
    }
}
