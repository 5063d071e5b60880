//! A minimal msgpack reader and writer for the group schema.
//!
//! Only the subset the schema needs is written (maps, arrays, strings, binaries, unsigned
//! integers, floats, booleans); any msgpack value is accepted and skipped where unknown keys
//! appear. The reader borrows from the input, checks every length against the bytes that remain
//! and never allocates based on an untrusted count.
use rmp::Marker;

use crate::error::{Result, WireError};

/// Maximum nesting of skipped unknown values (guards the stack against adversarial input).
const MAX_SKIP_DEPTH: usize = 32;

pub(crate) struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }

    pub(crate) fn offset(&self) -> usize {
        self.pos
    }

    pub(crate) fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    pub(crate) fn malformed(&self, detail: impl Into<String>) -> WireError {
        WireError::Malformed {
            offset: self.pos,
            detail: detail.into(),
        }
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let rest = &self.buf[self.pos..];
        match rest.get(..n) {
            Some(s) => {
                self.pos += n;
                Ok(s)
            }
            None => Err(WireError::Truncated {
                offset: self.pos,
                needed: n - rest.len(),
            }),
        }
    }

    fn take_array<const N: usize>(&mut self) -> Result<[u8; N]> {
        let s = self.take(N)?;
        let mut out = [0u8; N];
        out.copy_from_slice(s);
        Ok(out)
    }

    fn u8(&mut self) -> Result<u8> {
        Ok(self.take_array::<1>()?[0])
    }

    fn u16(&mut self) -> Result<u16> {
        Ok(u16::from_be_bytes(self.take_array()?))
    }

    fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_be_bytes(self.take_array()?))
    }

    fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_be_bytes(self.take_array()?))
    }

    fn marker(&mut self) -> Result<(Marker, usize)> {
        let at = self.pos;
        Ok((Marker::from_u8(self.u8()?), at))
    }

    fn type_error(at: usize, expected: &str, found: Marker) -> WireError {
        WireError::Malformed {
            offset: at,
            detail: format!("expected {expected}, found msgpack marker {found:?}"),
        }
    }

    /// A count of map entries or array items, bounded by the bytes left (each takes >= 1 byte).
    fn bounded_count(&self, at: usize, n: u32, per_item: usize) -> Result<usize> {
        let n = n as usize;
        if n.saturating_mul(per_item) > self.remaining() {
            return Err(WireError::Truncated {
                offset: at,
                needed: n.saturating_mul(per_item) - self.remaining(),
            });
        }
        Ok(n)
    }

    pub(crate) fn map_len(&mut self) -> Result<usize> {
        let (m, at) = self.marker()?;
        let n = match m {
            Marker::FixMap(n) => u32::from(n),
            Marker::Map16 => u32::from(self.u16()?),
            Marker::Map32 => self.u32()?,
            other => return Err(Self::type_error(at, "a map", other)),
        };
        self.bounded_count(at, n, 2)
    }

    pub(crate) fn array_len(&mut self) -> Result<usize> {
        let (m, at) = self.marker()?;
        let n = match m {
            Marker::FixArray(n) => u32::from(n),
            Marker::Array16 => u32::from(self.u16()?),
            Marker::Array32 => self.u32()?,
            other => return Err(Self::type_error(at, "an array", other)),
        };
        self.bounded_count(at, n, 1)
    }

    pub(crate) fn str(&mut self) -> Result<&'a str> {
        let (m, at) = self.marker()?;
        let n = match m {
            Marker::FixStr(n) => usize::from(n),
            Marker::Str8 => usize::from(self.u8()?),
            Marker::Str16 => usize::from(self.u16()?),
            Marker::Str32 => self.u32()? as usize,
            other => return Err(Self::type_error(at, "a string", other)),
        };
        let bytes = self.take(n)?;
        std::str::from_utf8(bytes).map_err(|_| WireError::Malformed {
            offset: at,
            detail: "string is not valid UTF-8".into(),
        })
    }

    pub(crate) fn bin(&mut self) -> Result<&'a [u8]> {
        let (m, at) = self.marker()?;
        let n = match m {
            Marker::Bin8 => usize::from(self.u8()?),
            Marker::Bin16 => usize::from(self.u16()?),
            Marker::Bin32 => self.u32()? as usize,
            other => return Err(Self::type_error(at, "binary data", other)),
        };
        self.take(n)
    }

    /// A non-negative integer of any msgpack width.
    pub(crate) fn uint(&mut self) -> Result<u64> {
        let (m, at) = self.marker()?;
        let v: i128 = match m {
            Marker::FixPos(n) => n.into(),
            Marker::FixNeg(n) => n.into(),
            Marker::U8 => self.u8()?.into(),
            Marker::U16 => self.u16()?.into(),
            Marker::U32 => self.u32()?.into(),
            Marker::U64 => self.u64()?.into(),
            Marker::I8 => (self.u8()? as i8).into(),
            Marker::I16 => (self.u16()? as i16).into(),
            Marker::I32 => (self.u32()? as i32).into(),
            Marker::I64 => (self.u64()? as i64).into(),
            other => return Err(Self::type_error(at, "an integer", other)),
        };
        u64::try_from(v).map_err(|_| WireError::Malformed {
            offset: at,
            detail: format!("expected a non-negative integer, found {v}"),
        })
    }

    pub(crate) fn u32_value(&mut self, field: &str) -> Result<u32> {
        let at = self.pos;
        let v = self.uint()?;
        u32::try_from(v).map_err(|_| WireError::Malformed {
            offset: at,
            detail: format!("`{field}` = {v} does not fit in u32"),
        })
    }

    /// A float (f32 or f64; Python writes f64) or an integer, as f32.
    pub(crate) fn f32_value(&mut self) -> Result<f32> {
        let at = self.pos;
        let (m, _) = self.marker()?;
        match m {
            Marker::F32 => Ok(f32::from_bits(self.u32()?)),
            Marker::F64 => Ok(f64::from_bits(self.u64()?) as f32),
            _ => {
                self.pos = at;
                Ok(self.uint()? as f32)
            }
        }
    }

    pub(crate) fn bool(&mut self) -> Result<bool> {
        let (m, at) = self.marker()?;
        match m {
            Marker::True => Ok(true),
            Marker::False => Ok(false),
            other => Err(Self::type_error(at, "a boolean", other)),
        }
    }

    /// Skip one value of any type (used for unknown keys).
    pub(crate) fn skip(&mut self) -> Result<()> {
        self.skip_at_depth(0)
    }

    fn skip_at_depth(&mut self, depth: usize) -> Result<()> {
        if depth > MAX_SKIP_DEPTH {
            return Err(self.malformed("unknown value nested too deeply"));
        }
        let (m, at) = self.marker()?;
        let skip_bytes = match m {
            Marker::FixPos(_) | Marker::FixNeg(_) | Marker::Null | Marker::True | Marker::False => {
                0
            }
            Marker::U8 | Marker::I8 => 1,
            Marker::U16 | Marker::I16 => 2,
            Marker::U32 | Marker::I32 | Marker::F32 => 4,
            Marker::U64 | Marker::I64 | Marker::F64 => 8,
            Marker::FixStr(n) => usize::from(n),
            Marker::Str8 | Marker::Bin8 => usize::from(self.u8()?),
            Marker::Str16 | Marker::Bin16 => usize::from(self.u16()?),
            Marker::Str32 | Marker::Bin32 => self.u32()? as usize,
            Marker::FixExt1 => 2,
            Marker::FixExt2 => 3,
            Marker::FixExt4 => 5,
            Marker::FixExt8 => 9,
            Marker::FixExt16 => 17,
            Marker::Ext8 => usize::from(self.u8()?) + 1,
            Marker::Ext16 => usize::from(self.u16()?) + 1,
            Marker::Ext32 => self.u32()? as usize + 1,
            Marker::FixArray(_) | Marker::Array16 | Marker::Array32 => {
                self.pos = at;
                for _ in 0..self.array_len()? {
                    self.skip_at_depth(depth + 1)?;
                }
                0
            }
            Marker::FixMap(_) | Marker::Map16 | Marker::Map32 => {
                self.pos = at;
                for _ in 0..self.map_len()? {
                    self.skip_at_depth(depth + 1)?;
                    self.skip_at_depth(depth + 1)?;
                }
                0
            }
            Marker::Reserved => return Err(Self::type_error(at, "a msgpack value", m)),
        };
        self.take(skip_bytes).map(|_| ())
    }
}

/// Infallible msgpack writes into a `Vec<u8>`.
pub(crate) struct Writer<'a> {
    pub(crate) out: &'a mut Vec<u8>,
}

impl Writer<'_> {
    fn marker(&mut self, m: Marker) {
        self.out.push(m.to_u8());
    }

    /// Lengths above u32::MAX are not representable; the codec checks sizes before writing.
    fn len32(n: usize) -> u32 {
        u32::try_from(n).unwrap_or(u32::MAX)
    }

    pub(crate) fn map_len(&mut self, n: usize) {
        let n = Self::len32(n);
        if n < 16 {
            self.marker(Marker::FixMap(n as u8));
        } else if let Ok(n) = u16::try_from(n) {
            self.marker(Marker::Map16);
            self.out.extend_from_slice(&n.to_be_bytes());
        } else {
            self.marker(Marker::Map32);
            self.out.extend_from_slice(&n.to_be_bytes());
        }
    }

    pub(crate) fn array_len(&mut self, n: usize) {
        let n = Self::len32(n);
        if n < 16 {
            self.marker(Marker::FixArray(n as u8));
        } else if let Ok(n) = u16::try_from(n) {
            self.marker(Marker::Array16);
            self.out.extend_from_slice(&n.to_be_bytes());
        } else {
            self.marker(Marker::Array32);
            self.out.extend_from_slice(&n.to_be_bytes());
        }
    }

    pub(crate) fn str(&mut self, s: &str) {
        let n = Self::len32(s.len());
        if n < 32 {
            self.marker(Marker::FixStr(n as u8));
        } else if let Ok(n) = u8::try_from(n) {
            self.marker(Marker::Str8);
            self.out.push(n);
        } else if let Ok(n) = u16::try_from(n) {
            self.marker(Marker::Str16);
            self.out.extend_from_slice(&n.to_be_bytes());
        } else {
            self.marker(Marker::Str32);
            self.out.extend_from_slice(&n.to_be_bytes());
        }
        self.out.extend_from_slice(s.as_bytes());
    }

    /// The header of a binary of `n` bytes; the caller appends exactly `n` bytes.
    pub(crate) fn bin_len(&mut self, n: usize) {
        let n = Self::len32(n);
        if let Ok(n) = u8::try_from(n) {
            self.marker(Marker::Bin8);
            self.out.push(n);
        } else if let Ok(n) = u16::try_from(n) {
            self.marker(Marker::Bin16);
            self.out.extend_from_slice(&n.to_be_bytes());
        } else {
            self.marker(Marker::Bin32);
            self.out.extend_from_slice(&n.to_be_bytes());
        }
    }

    pub(crate) fn uint(&mut self, v: u64) {
        if v < 128 {
            self.marker(Marker::FixPos(v as u8));
        } else if let Ok(v) = u8::try_from(v) {
            self.marker(Marker::U8);
            self.out.push(v);
        } else if let Ok(v) = u16::try_from(v) {
            self.marker(Marker::U16);
            self.out.extend_from_slice(&v.to_be_bytes());
        } else if let Ok(v) = u32::try_from(v) {
            self.marker(Marker::U32);
            self.out.extend_from_slice(&v.to_be_bytes());
        } else {
            self.marker(Marker::U64);
            self.out.extend_from_slice(&v.to_be_bytes());
        }
    }

    pub(crate) fn f32(&mut self, v: f32) {
        self.marker(Marker::F32);
        self.out.extend_from_slice(&v.to_bits().to_be_bytes());
    }

    pub(crate) fn bool(&mut self, v: bool) {
        self.marker(if v { Marker::True } else { Marker::False });
    }
}
