//! Errors of the exporter crate: each names the file, tensor, field or profile at fault and, where there is one,
//! the fix.

use std::path::{Path, PathBuf};

/// Result alias of the exporter crate.
pub type Result<T> = std::result::Result<T, Error>;

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    // --- files
    // The cause is part of the message, not a `source`, so error chains print it once.
    #[error("{}: {err}", path.display())]
    Io { path: PathBuf, err: std::io::Error },
    #[error("{}: {err}", path.display())]
    InFile { path: PathBuf, err: Box<Error> },
    /// A bundle that fails [`crate::integrity::check_bundle`]: every problem, each naming its file.
    #[error(
        "bundle {} failed its integrity check ({} problem(s)): {}; re-create it with `{rebuild}` (check it with \
         `totoc bundle verify`)",
        dir.display(),
        problems.len(),
        problems.iter().map(|p| p.to_string()).collect::<Vec<_>>().join("; ")
    )]
    Integrity { dir: PathBuf, problems: Vec<crate::bundle_files::Problem>, rebuild: String },

    // --- model config
    #[error("invalid model config: {message}")]
    Config { message: String },

    // --- checkpoint
    #[error("checkpoint: {message}")]
    Checkpoint { message: String },
    #[error("checkpoint tensor `{name}` is missing (expected shape {expected:?})")]
    MissingTensor { name: String, expected: Vec<usize> },
    #[error("checkpoint has unexpected tensor(s) {names:?}: this Toto config does not use them")]
    UnexpectedTensors { names: Vec<String> },
    #[error("checkpoint tensor `{name}` has shape {actual:?}, expected {expected:?}")]
    TensorShape { name: String, expected: Vec<usize>, actual: Vec<usize> },
    #[error("checkpoint tensor `{name}` has dtype {actual}, expected {expected}")]
    TensorDtype { name: String, expected: String, actual: String },
    #[error(
        "{}: not a valid safetensors file: {message}; re-download or re-save the checkpoint",
        path.display()
    )]
    SafetensorsFormat { path: PathBuf, message: String },
    #[error("{}: tensor `{name}`: {message}; re-download or re-save the checkpoint", path.display())]
    TensorData { path: PathBuf, name: String, message: String },
    #[error(
        "checkpoint holds `{canonical}` twice, as `{first}` and `{second}` (xFormers and torch names); keep \
         one"
    )]
    DuplicateTensor { canonical: String, first: String, second: String },
    #[error(
        "checkpoint has exogenous-variable label tensor(s) {names:?}: fine-tuned checkpoints with \
         exogenous-variable labels (Toto fusion) are not supported; export a base checkpoint"
    )]
    ExogenousLabels { names: Vec<String> },
    #[error(
        "no checkpoint tensor `{name}`: not a canonical Toto tensor name (see checkpoint::expected_tensors)"
    )]
    UnknownTensor { name: String },

    // --- profiles
    #[error("profile config: {message}")]
    Profile { message: String },
    #[error("{file}: line {line}, column {column}: {message}")]
    ProfileSyntax { file: String, line: u64, column: u64, message: String },
    #[error("{file}: line {line}: {field} {message}")]
    ProfileField { file: String, line: u64, field: String, message: String },
    #[error("unknown profile `{name}`; available: {}", available.join(", "))]
    UnknownProfile { name: String, available: Vec<String> },
    #[error(
        "profile `{profile}`: context {context} + horizon {horizon} need {patches} patches of \
         {patch_size} points (ceil(context/P) + ceil(horizon/P)), more than this model's limit of \
         {max_patches}; lower context or horizon"
    )]
    ProfileTooLong {
        profile: String,
        context: usize,
        horizon: usize,
        patch_size: usize,
        patches: usize,
        max_patches: usize,
    },

    // --- graph building
    #[error("graph `{graph}`: {message}")]
    Graph { graph: String, message: String },
}

impl Error {
    pub fn io(path: &Path, source: std::io::Error) -> Self {
        Error::Io { path: path.to_path_buf(), err: source }
    }

    /// Wraps an error with the file it came from (io errors already carry it).
    pub fn in_file(self, path: &Path) -> Self {
        match self {
            e @ (Error::Io { .. } | Error::InFile { .. }) => e,
            e => Error::InFile { path: path.to_path_buf(), err: Box::new(e) },
        }
    }
}
