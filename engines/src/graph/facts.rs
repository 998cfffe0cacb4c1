//! What totoc reads from an ONNX model file itself: external initializers and the cache outputs that may
//! update their inputs in place ([`ModelFacts`]).

use std::collections::HashMap;
use std::path::Path;

use exporter::pb::{tensor_proto, ModelProto};
use prost::Message;

use crate::error::{Error, Result};

/// The name of the input a cache output updates: `k_cache_out.3` → `k_cache.3` (a cache per layer),
/// `dep_k_cache_out` → `dep_k_cache` (a graph's single cache of its kind).
pub fn state_input_name(output: &str) -> Option<String> {
    match output.find("_out.") {
        Some(i) => Some(format!("{}{}", &output[..i], &output[i + 4..])),
        None => output.strip_suffix("_out").filter(|s| !s.is_empty()).map(str::to_string),
    }
}

/// The graph facts the runner needs from the ONNX file (the model is small: weights are external).
#[derive(Debug, Clone, Default)]
pub struct ModelFacts {
    /// Initializers stored in external files.
    pub external: Vec<ExternalInit>,
    /// Graph outputs that may alias a graph input (the in-place rule of the module docs holds).
    pub in_place: Vec<(String, String)>,
}

/// An initializer stored in an external file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExternalInit {
    pub name: String,
    pub dims: Vec<i64>,
    /// ONNX `TensorProto.DataType`.
    pub data_type: i32,
    /// File, relative to the model's directory.
    pub location: String,
    pub offset: u64,
    pub length: u64,
}

/// Reads [`ModelFacts`] from a model file.
pub fn model_facts(path: &Path) -> Result<ModelFacts> {
    let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
    let model = ModelProto::decode(&*bytes).map_err(|e| Error::Session {
        graph: path.display().to_string(),
        message: format!("not an ONNX model: {e}"),
    })?;
    Ok(facts_of(&model))
}

pub(crate) fn facts_of(model: &ModelProto) -> ModelFacts {
    let Some(g) = &model.graph else { return ModelFacts::default() };
    let external = g
        .initializer
        .iter()
        .filter(|t| t.data_location == tensor_proto::DataLocation::External as i32)
        .filter_map(|t| {
            let kv = |k: &str| t.external_data.iter().find(|e| e.key == k).map(|e| e.value.clone());
            Some(ExternalInit {
                name: t.name.clone(),
                dims: t.dims.clone(),
                data_type: t.data_type,
                location: kv("location")?,
                offset: kv("offset").and_then(|v| v.parse().ok()).unwrap_or(0),
                length: kv("length").and_then(|v| v.parse().ok())?,
            })
        })
        .collect();
    let inputs: Vec<&str> = g.input.iter().map(|v| v.name.as_str()).collect();
    let mut consumers: HashMap<&str, usize> = HashMap::new();
    for n in &g.node {
        for i in &n.input {
            *consumers.entry(i.as_str()).or_default() += 1;
        }
    }
    let mut in_place = Vec::new();
    for out in &g.output {
        let Some(input) = state_input_name(&out.name) else { continue };
        if !inputs.contains(&input.as_str()) {
            continue;
        }
        let producer = g.node.iter().find(|n| n.output.first() == Some(&out.name));
        let ok = producer.is_some_and(|n| {
            matches!(n.op_type.as_str(), "TensorScatter" | "ScatterND") && n.input.first() == Some(&input)
        }) && consumers.get(input.as_str()) == Some(&1);
        if ok {
            in_place.push((input, out.name.clone()));
        }
    }
    ModelFacts { external, in_place }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_names() {
        assert_eq!(state_input_name("k_cache_out.3").as_deref(), Some("k_cache.3"));
        assert_eq!(state_input_name("v_cache_out.10").as_deref(), Some("v_cache.10"));
        assert_eq!(state_input_name("loc"), None);
        assert_eq!(state_input_name("dep_k_cache_out").as_deref(), Some("dep_k_cache"));
        assert_eq!(state_input_name("_out"), None);
        assert_eq!(state_input_name("output"), None);
    }
}
