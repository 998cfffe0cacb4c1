//! The bundle's shared weight file (ONNX external data).
//!
//! Every graph of a bundle references the same initializers by name, offset and length, so the 600 MB of the
//! base model is written once per precision, not once per graph or profile. Tensors are streamed to disk as they
//! are first requested (peak memory stays at one tensor) and aligned to 4 KiB so ONNX Runtime can map them.
//! Each tensor has its own element type: an fp16 bundle's `weights.fp16.bin` stores the matmul weights as f16
//! and the few weights of its fp32 regions (RMSNorm scales, the mixture heads) as f32.

use std::collections::{BTreeSet, HashMap};
use std::fs::File;
use std::io::{BufWriter, Seek, Write};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::graph::types::ElemType;
use crate::pb::{tensor_proto, StringStringEntryProto, TensorProto};
use crate::signature::DType;

const ALIGN: u64 = 4096;

struct Entry {
    dims: Vec<i64>,
    elem: ElemType,
    offset: u64,
    length: u64,
}

/// Accumulates weights into one external-data file.
pub struct WeightStore {
    path: PathBuf,
    /// File name as graphs reference it (relative to each graph's directory).
    location: String,
    file: BufWriter<File>,
    len: u64,
    entries: HashMap<String, Entry>,
    order: Vec<String>,
}

impl WeightStore {
    /// Creates `path`. `location` is how graphs refer to it (e.g. `../weights.fp32.bin`).
    pub fn create(path: &Path, location: &str) -> Result<Self> {
        let file = File::create(path).map_err(|e| Error::io(path, e))?;
        Ok(Self {
            path: path.to_path_buf(),
            location: location.to_string(),
            file: BufWriter::with_capacity(1 << 20, file),
            len: 0,
            entries: HashMap::new(),
            order: Vec::new(),
        })
    }

    /// Stores `name` as `dtype` unless it is already there; `make` computes its f32 values (row-major `dims`),
    /// rounded to nearest (ties to even) for f16.
    pub fn add(
        &mut self,
        name: &str,
        dims: &[usize],
        dtype: DType,
        make: impl FnOnce() -> Result<Vec<f32>>,
    ) -> Result<()> {
        self.add_bytes(name, dims, dtype.into(), || {
            let values = make()?;
            if values.len() != dims.iter().product::<usize>() {
                return Err(Error::Graph {
                    graph: "weights".into(),
                    message: format!("weight {name}: {} values for dims {dims:?}", values.len()),
                });
            }
            Ok(match dtype {
                DType::F32 => values.iter().flat_map(|v| v.to_le_bytes()).collect(),
                DType::F16 => values.iter().flat_map(|v| half::f16::from_f32(*v).to_le_bytes()).collect(),
                DType::I64 => {
                    return Err(Error::Graph {
                        graph: "weights".into(),
                        message: format!("weight {name}: weights are float (f32 or f16), not i64"),
                    })
                }
            })
        })
    }

    /// Stores `name` as quantized weight codes of one byte each (`elem`: int8 as two's complement bytes, or
    /// uint8) and `dims` unless it is already there; `make` computes them.
    pub fn add_codes(
        &mut self,
        name: &str,
        dims: &[usize],
        elem: ElemType,
        make: impl FnOnce() -> Result<Vec<u8>>,
    ) -> Result<()> {
        assert!(matches!(elem, ElemType::I8 | ElemType::U8), "codes are one byte each, not {elem:?}");
        self.add_bytes(name, dims, elem, || {
            let codes = make()?;
            if codes.len() != dims.iter().product::<usize>() {
                return Err(Error::Graph {
                    graph: "weights".into(),
                    message: format!("weight {name}: {} bytes for {elem:?} dims {dims:?}", codes.len()),
                });
            }
            Ok(codes)
        })
    }

    /// Stores `name` (little-endian `bytes` of `elem` values) unless it is already there.
    fn add_bytes(
        &mut self,
        name: &str,
        dims: &[usize],
        elem: ElemType,
        make: impl FnOnce() -> Result<Vec<u8>>,
    ) -> Result<()> {
        let want: Vec<i64> = dims.iter().map(|&d| d as i64).collect();
        if let Some(e) = self.entries.get(name) {
            if e.dims != want || e.elem != elem {
                return Err(Error::Graph {
                    graph: "weights".into(),
                    message: format!(
                        "weight {name} requested as {elem:?} {want:?} but stored as {:?} {:?}",
                        e.elem, e.dims
                    ),
                });
            }
            return Ok(());
        }
        let bytes = make()?;
        let pad = (ALIGN - self.len % ALIGN) % ALIGN;
        let io = |e| Error::io(&self.path, e);
        self.file.write_all(&vec![0u8; pad as usize]).map_err(io)?;
        let offset = self.len + pad;
        self.file.write_all(&bytes).map_err(|e| Error::io(&self.path, e))?;
        let length = bytes.len() as u64;
        self.len = offset + length;
        self.entries.insert(name.to_string(), Entry { dims: want, elem, offset, length });
        self.order.push(name.to_string());
        Ok(())
    }

    /// External-data initializers for the stored weights among `used`, in storage order.
    pub fn references(&self, used: &BTreeSet<String>) -> Vec<TensorProto> {
        let kv = |k: &str, v: String| StringStringEntryProto { key: k.into(), value: v };
        self.order
            .iter()
            .filter(|n| used.contains(*n))
            .map(|n| {
                let e = &self.entries[n];
                TensorProto {
                    dims: e.dims.clone(),
                    data_type: e.elem.onnx(),
                    name: n.clone(),
                    data_location: tensor_proto::DataLocation::External as i32,
                    external_data: vec![
                        kv("location", self.location.clone()),
                        kv("offset", e.offset.to_string()),
                        kv("length", e.length.to_string()),
                    ],
                    ..Default::default()
                }
            })
            .collect()
    }

    /// Total bytes of weights (without alignment padding).
    pub fn weight_bytes(&self) -> u64 {
        self.entries.values().map(|e| e.length).sum()
    }

    /// Flushes and syncs the file.
    pub fn finish(mut self) -> Result<()> {
        self.file.flush().map_err(|e| Error::io(&self.path, e))?;
        let f = self.file.get_mut();
        let _ = f.stream_position();
        f.sync_all().map_err(|e| Error::io(&self.path, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, SeekFrom};

    impl WeightStore {
        /// Leaves a hole of `bytes` in the file, as if that many bytes of weights had been stored (a sparse file,
        /// so tests reach offsets past 4 GiB without writing them).
        fn skip(&mut self, bytes: u64) {
            self.file.seek(SeekFrom::Current(bytes as i64)).unwrap();
            self.len += bytes;
        }
    }

    #[test]
    fn offsets_past_4_gib_are_written_and_referenced() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("w.bin");
        let mut store = WeightStore::create(&path, "w.bin").unwrap();
        store.add("low", &[2], DType::F32, || Ok(vec![1.0, 2.0])).unwrap();
        store.skip(9 << 29); // 4.5 GiB
        store.add("high", &[3], DType::F32, || Ok(vec![-1.0, 0.5, 7.0])).unwrap();
        let used: BTreeSet<String> = ["low", "high"].iter().map(|s| s.to_string()).collect();
        let refs = store.references(&used);
        store.finish().unwrap();
        let offset = |t: &TensorProto| {
            t.external_data.iter().find(|e| e.key == "offset").unwrap().value.parse::<u64>().unwrap()
        };
        assert_eq!(offset(&refs[0]), 0);
        let high = offset(&refs[1]);
        assert!(high > u64::from(u32::MAX) && high.is_multiple_of(ALIGN), "{high}");
        assert_eq!(std::fs::metadata(&path).unwrap().len(), high + 12);
        let mut f = File::open(&path).unwrap();
        f.seek(SeekFrom::Start(high)).unwrap();
        let mut b = [0u8; 12];
        f.read_exact(&mut b).unwrap();
        let vals: Vec<f32> = b.chunks(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect();
        assert_eq!(vals, [-1.0, 0.5, 7.0]);
    }
}
