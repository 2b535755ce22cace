//! A serde `Serializer` to plain JS values: what turns the core's reports, events, traces,
//! metadata and errors into the objects `refresh()` hands to JavaScript.
//!
//! Structs and maps become objects (in field order), sequences and tuples arrays, bytes a
//! `Uint8Array`, `None` and unit `null` (as in JSON), unit variants their name, other
//! variants `{ variant: payload }` (serde's externally tagged form; internally and
//! adjacently tagged enums arrive as structs and maps). Numbers become JS numbers; an
//! integer beyond 2^53 − 1, which a number cannot hold exactly, is an error rather than a
//! silently different value.

use core::fmt;

use js_sys::{Array, Object, Reflect};
use serde::ser::{self, Serialize};
use wasm_bindgen::JsValue;

use super::convert::{set, SerdeError as Error};

/// The largest integer a JS number holds exactly (`Number.MAX_SAFE_INTEGER`).
const MAX_SAFE_INTEGER: u64 = (1 << 53) - 1;

/// Serialises `value` to a plain JS value; what cannot be serialised becomes a JS `Error`
/// saying why.
pub(crate) fn to_js<T: Serialize + ?Sized>(value: &T) -> JsValue {
    value.serialize(ToJs).unwrap_or_else(|Error(message)| js_sys::Error::new(&message).into())
}

struct ToJs;

/// `{ variant: value }`.
fn tagged(variant: &'static str, value: &JsValue) -> JsValue {
    let object = Object::new();
    set(&object, variant, value);
    object.into()
}

/// What serialising an integer beyond [`MAX_SAFE_INTEGER`] fails with.
fn unsafe_integer(n: &dyn fmt::Display) -> Error {
    Error(format!("{n} can't be represented as a JavaScript number"))
}

impl ser::Serializer for ToJs {
    type Ok = JsValue;
    type Error = Error;
    type SerializeSeq = Items;
    type SerializeTuple = Items;
    type SerializeTupleStruct = Items;
    type SerializeTupleVariant = Tagged<Items>;
    type SerializeMap = Fields;
    type SerializeStruct = Fields;
    type SerializeStructVariant = Tagged<Fields>;

    fn serialize_bool(self, v: bool) -> Result<JsValue, Error> {
        Ok(JsValue::from_bool(v))
    }
    fn serialize_i8(self, v: i8) -> Result<JsValue, Error> {
        self.serialize_f64(v.into())
    }
    fn serialize_i16(self, v: i16) -> Result<JsValue, Error> {
        self.serialize_f64(v.into())
    }
    fn serialize_i32(self, v: i32) -> Result<JsValue, Error> {
        self.serialize_f64(v.into())
    }
    fn serialize_i64(self, v: i64) -> Result<JsValue, Error> {
        if v.unsigned_abs() > MAX_SAFE_INTEGER {
            return Err(unsafe_integer(&v));
        }
        self.serialize_f64(v as f64)
    }
    fn serialize_i128(self, v: i128) -> Result<JsValue, Error> {
        self.serialize_i64(i64::try_from(v).map_err(|_| unsafe_integer(&v))?)
    }
    fn serialize_u8(self, v: u8) -> Result<JsValue, Error> {
        self.serialize_f64(v.into())
    }
    fn serialize_u16(self, v: u16) -> Result<JsValue, Error> {
        self.serialize_f64(v.into())
    }
    fn serialize_u32(self, v: u32) -> Result<JsValue, Error> {
        self.serialize_f64(v.into())
    }
    fn serialize_u64(self, v: u64) -> Result<JsValue, Error> {
        if v > MAX_SAFE_INTEGER {
            return Err(unsafe_integer(&v));
        }
        self.serialize_f64(v as f64)
    }
    fn serialize_u128(self, v: u128) -> Result<JsValue, Error> {
        self.serialize_u64(u64::try_from(v).map_err(|_| unsafe_integer(&v))?)
    }
    fn serialize_f32(self, v: f32) -> Result<JsValue, Error> {
        self.serialize_f64(v.into())
    }
    fn serialize_f64(self, v: f64) -> Result<JsValue, Error> {
        Ok(JsValue::from_f64(v))
    }
    fn serialize_char(self, v: char) -> Result<JsValue, Error> {
        self.serialize_str(v.encode_utf8(&mut [0; 4]))
    }
    fn serialize_str(self, v: &str) -> Result<JsValue, Error> {
        Ok(JsValue::from_str(v))
    }
    fn serialize_bytes(self, v: &[u8]) -> Result<JsValue, Error> {
        Ok(js_sys::Uint8Array::from(v).into())
    }
    fn serialize_none(self) -> Result<JsValue, Error> {
        Ok(JsValue::NULL)
    }
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<JsValue, Error> {
        value.serialize(self)
    }
    fn serialize_unit(self) -> Result<JsValue, Error> {
        Ok(JsValue::NULL)
    }
    fn serialize_unit_struct(self, _: &'static str) -> Result<JsValue, Error> {
        Ok(JsValue::NULL)
    }
    fn serialize_unit_variant(self, _: &'static str, _: u32, variant: &'static str) -> Result<JsValue, Error> {
        Ok(JsValue::from_str(variant))
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(self, _: &'static str, value: &T) -> Result<JsValue, Error> {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<JsValue, Error> {
        Ok(tagged(variant, &value.serialize(self)?))
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<Items, Error> {
        Ok(Items(Array::new()))
    }
    fn serialize_tuple(self, _: usize) -> Result<Items, Error> {
        Ok(Items(Array::new()))
    }
    fn serialize_tuple_struct(self, _: &'static str, _: usize) -> Result<Items, Error> {
        Ok(Items(Array::new()))
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        _: usize,
    ) -> Result<Tagged<Items>, Error> {
        Ok(Tagged { variant, inner: Items(Array::new()) })
    }
    fn serialize_map(self, _: Option<usize>) -> Result<Fields, Error> {
        Ok(Fields { object: Object::new(), key: JsValue::UNDEFINED })
    }
    fn serialize_struct(self, _: &'static str, _: usize) -> Result<Fields, Error> {
        Ok(Fields { object: Object::new(), key: JsValue::UNDEFINED })
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        _: usize,
    ) -> Result<Tagged<Fields>, Error> {
        Ok(Tagged { variant, inner: Fields { object: Object::new(), key: JsValue::UNDEFINED } })
    }
}

/// An array being filled.
pub(crate) struct Items(Array);

impl ser::SerializeSeq for Items {
    type Ok = JsValue;
    type Error = Error;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        self.0.push(&value.serialize(ToJs)?);
        Ok(())
    }
    fn end(self) -> Result<JsValue, Error> {
        Ok(self.0.into())
    }
}

impl ser::SerializeTuple for Items {
    type Ok = JsValue;
    type Error = Error;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        ser::SerializeSeq::serialize_element(self, value)
    }
    fn end(self) -> Result<JsValue, Error> {
        Ok(self.0.into())
    }
}

impl ser::SerializeTupleStruct for Items {
    type Ok = JsValue;
    type Error = Error;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        ser::SerializeSeq::serialize_element(self, value)
    }
    fn end(self) -> Result<JsValue, Error> {
        Ok(self.0.into())
    }
}

/// An object being filled: a struct's fields, or a map's entries (keys that are not
/// strings become property names as JS makes them, e.g. `1` → `"1"`).
pub(crate) struct Fields {
    object: Object,
    /// A map's key, between `serialize_key` and `serialize_value`.
    key: JsValue,
}

impl ser::SerializeStruct for Fields {
    type Ok = JsValue;
    type Error = Error;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, key: &'static str, value: &T) -> Result<(), Error> {
        set(&self.object, key, &value.serialize(ToJs)?);
        Ok(())
    }
    fn end(self) -> Result<JsValue, Error> {
        Ok(self.object.into())
    }
}

impl ser::SerializeMap for Fields {
    type Ok = JsValue;
    type Error = Error;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), Error> {
        self.key = key.serialize(ToJs)?;
        Ok(())
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        // Setting a property on a fresh plain object cannot fail.
        let _ = Reflect::set(&self.object, &self.key, &value.serialize(ToJs)?);
        Ok(())
    }
    fn end(self) -> Result<JsValue, Error> {
        Ok(self.object.into())
    }
}

/// A tuple or struct variant's payload, wrapped as `{ variant: payload }` at the end.
pub(crate) struct Tagged<S> {
    variant: &'static str,
    inner: S,
}

impl ser::SerializeTupleVariant for Tagged<Items> {
    type Ok = JsValue;
    type Error = Error;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        ser::SerializeSeq::serialize_element(&mut self.inner, value)
    }
    fn end(self) -> Result<JsValue, Error> {
        Ok(tagged(self.variant, &self.inner.0.into()))
    }
}

impl ser::SerializeStructVariant for Tagged<Fields> {
    type Ok = JsValue;
    type Error = Error;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, key: &'static str, value: &T) -> Result<(), Error> {
        ser::SerializeStruct::serialize_field(&mut self.inner, key, value)
    }
    fn end(self) -> Result<JsValue, Error> {
        Ok(tagged(self.variant, &self.inner.object.into()))
    }
}
