//! Typed arrays on the wire: `{"dtype": "<u4", "shape": [n], "data": <bin>}`.
//!
//! Data is raw little-endian bytes so that Python reads it with `numpy.frombuffer` (no copy) and
//! Rust converts it in bulk; no per-element msgpack values.
use crate::error::{Result, WireError};
use crate::msgpack::{Reader, Writer};

/// An element type that travels as raw little-endian bytes.
pub(crate) trait Elem: Copy + Sized {
    /// numpy's `dtype.str` for this type.
    const DTYPE: &'static str;
    /// Other spellings accepted when reading (single-byte types have no byte order).
    const DTYPE_ALIASES: &'static [&'static str] = &[];
    const SIZE: usize;
    fn put(self, dst: &mut [u8]);
    fn get(src: &[u8]) -> Self;

    fn extend_le(values: &[Self], out: &mut Vec<u8>) {
        let start = out.len();
        out.resize(start + values.len() * Self::SIZE, 0);
        for (dst, v) in out[start..].chunks_exact_mut(Self::SIZE).zip(values) {
            v.put(dst);
        }
    }

    fn from_le(data: &[u8]) -> Vec<Self> {
        data.chunks_exact(Self::SIZE).map(Self::get).collect()
    }
}

impl Elem for u32 {
    const DTYPE: &'static str = "<u4";
    const SIZE: usize = 4;
    #[inline]
    fn put(self, dst: &mut [u8]) {
        dst.copy_from_slice(&self.to_le_bytes());
    }
    #[inline]
    fn get(s: &[u8]) -> Self {
        u32::from_le_bytes([s[0], s[1], s[2], s[3]])
    }
}

impl Elem for f32 {
    const DTYPE: &'static str = "<f4";
    const SIZE: usize = 4;
    #[inline]
    fn put(self, dst: &mut [u8]) {
        dst.copy_from_slice(&self.to_le_bytes());
    }
    #[inline]
    fn get(s: &[u8]) -> Self {
        f32::from_le_bytes([s[0], s[1], s[2], s[3]])
    }
}

impl Elem for u8 {
    const DTYPE: &'static str = "|u1";
    const DTYPE_ALIASES: &'static [&'static str] = &["<u1", "u1"];
    const SIZE: usize = 1;
    #[inline]
    fn put(self, dst: &mut [u8]) {
        dst[0] = self;
    }
    #[inline]
    fn get(s: &[u8]) -> Self {
        s[0]
    }

    fn extend_le(values: &[Self], out: &mut Vec<u8>) {
        out.extend_from_slice(values);
    }

    fn from_le(data: &[u8]) -> Vec<Self> {
        data.to_vec()
    }
}

/// Write `values` as an array of `shape` (whose product is `values.len()`).
pub(crate) fn write_array<T: Elem>(w: &mut Writer<'_>, values: &[T], shape: &[usize]) {
    w.map_len(3);
    w.str("dtype");
    w.str(T::DTYPE);
    w.str("shape");
    w.array_len(shape.len());
    for &d in shape {
        w.uint(d as u64);
    }
    w.str("data");
    w.bin_len(values.len() * T::SIZE);
    T::extend_le(values, w.out);
}

/// Read an array whose shape must be `[n]` (`cols == None`) or `[k, cols]`; returns the flat
/// values.
pub(crate) fn read_array<T: Elem>(
    r: &mut Reader<'_>,
    field: &'static str,
    cols: Option<usize>,
) -> Result<Vec<T>> {
    let at = r.offset();
    let mut dtype_ok = false;
    let mut shape: Option<Vec<u64>> = None;
    let mut data: Option<&[u8]> = None;
    for _ in 0..r.map_len()? {
        match r.str()? {
            "dtype" => {
                let d_at = r.offset();
                let d = r.str()?;
                if d != T::DTYPE && !T::DTYPE_ALIASES.contains(&d) {
                    return Err(WireError::Malformed {
                        offset: d_at,
                        detail: format!("`{field}` has dtype {d:?}, expected {:?}", T::DTYPE),
                    });
                }
                dtype_ok = true;
            }
            "shape" => {
                let n = r.array_len()?;
                let mut dims = Vec::with_capacity(n.min(4));
                for _ in 0..n {
                    dims.push(r.uint()?);
                }
                shape = Some(dims);
            }
            "data" => data = Some(r.bin()?),
            _ => r.skip()?,
        }
    }
    if !dtype_ok {
        return Err(WireError::MissingField { field: "dtype" });
    }
    let shape = shape.ok_or(WireError::MissingField { field: "shape" })?;
    let data = data.ok_or(WireError::MissingField { field: "data" })?;
    let bad_shape = |detail: String| WireError::Malformed { offset: at, detail };
    let elems = match (cols, shape.as_slice()) {
        (None, [n]) => *n,
        (Some(c), [k, c2]) if *c2 == c as u64 => k.saturating_mul(*c2),
        // An empty 2-D array may be written as shape [0] by careless encoders.
        (Some(_), [0]) => 0,
        _ => {
            return Err(bad_shape(format!(
                "`{field}` has shape {shape:?}, expected {}",
                match cols {
                    None => "[n]".to_string(),
                    Some(c) => format!("[k, {c}]"),
                }
            )))
        }
    };
    let expected = usize::try_from(elems)
        .ok()
        .and_then(|e| e.checked_mul(T::SIZE))
        .unwrap_or(usize::MAX);
    if expected != data.len() {
        return Err(WireError::InconsistentLength {
            field,
            expected,
            found: data.len(),
        });
    }
    Ok(T::from_le(data))
}
