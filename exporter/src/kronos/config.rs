//! Kronos configuration: the two `config.json` files of a Kronos model (shiyu-coder/Kronos, as vendored in
//! kronos-finance 0.1.5): the predictor's (`Kronos.__init__`'s arguments, as `PyTorchModelHubMixin.save_pretrained`
//! writes them) and its tokenizer's (`KronosTokenizer.__init__`'s).
//!
//! Upstream's constructors have no defaults, so every key is required; unknown keys are refused (upstream's
//! non-strict loading would ignore them), each naming the key. Values upstream accepts but cannot run correctly
//! are refused with the reason: `s1_bits ≠ s2_bits` (the tokenizer's `indices_to_bits(half=True)` takes
//! `codebook_dim/2` bits for both halves, so the tokens decode into the wrong bits without an error), a predictor
//! and a tokenizer with different bit counts (a mismatched pair loads without an error too: only the embedding
//! tables' sizes tell), and head sizes the rotary embedding cannot rotate (an odd head dimension).
//!
//! Dropout probabilities are read and kept but play no part: totoc reproduces eval mode.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// Columns of a candle row, the tokenizer's `d_in`: open, high, low, close, volume, amount.
pub const ROW_COLUMNS: usize = 6;
/// The dependency-aware layer's heads (`DependencyAwareLayer(d_model)` keeps its default `n_heads=4`).
pub const DEP_HEADS: usize = 4;
/// Sizes of the time-feature tables, in the stamp's column order: minute, hour, weekday, day, month
/// (`TemporalEmbedding`).
pub const TIME_FEATURES: [(&str, usize); 5] =
    [("minute", 60), ("hour", 24), ("weekday", 7), ("day", 32), ("month", 13)];
/// Largest token bit count totoc exports: a vocabulary of 2^16 rows per table.
pub const MAX_BITS: usize = 16;
/// Keys only a predictor config has (`Kronos.__init__`'s `learn_te`), and only a tokenizer's
/// (`KronosTokenizer.__init__`'s `n_enc_layers`): how the registry tells the two apart.
pub const PREDICTOR_KEYS: [&str; 2] = ["s1_bits", "learn_te"];
pub const TOKENIZER_KEYS: [&str; 2] = ["s1_bits", "n_enc_layers"];
/// The request `params` Kronos takes: `max_context` (the rows its transformer sees, ≤ the engine's window;
/// `KronosPredictor`'s default 512) and `clip` (the normalised values' bound, default 5).
pub const PARAMS: [&str; 2] = ["max_context", "clip"];
/// RMSNorm's epsilon (`RMSNorm(dim, eps=1e-5)`; no module overrides it).
pub const NORM_EPS: f32 = 1e-5;

/// The predictor's `config.json` (`Kronos`): token bits, transformer sizes, dropouts, learned time tables.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PredictorConfig {
    pub s1_bits: usize,
    pub s2_bits: usize,
    pub n_layers: usize,
    pub d_model: usize,
    pub n_heads: usize,
    pub ff_dim: usize,
    pub ffn_dropout_p: f64,
    pub attn_dropout_p: f64,
    pub resid_dropout_p: f64,
    pub token_dropout_p: f64,
    /// `true`: the time tables are `nn.Embedding`s (`…_embed.weight`); `false`: `FixedEmbedding`s
    /// (`…_embed.emb.weight`), whose sinusoids `Kronos._init_weights` overwrites: either way, loaded tables.
    pub learn_te: bool,
}

/// The tokenizer's `config.json` (`KronosTokenizer`): its encoder/decoder sizes and the quantizer's settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenizerConfig {
    pub d_in: usize,
    pub d_model: usize,
    pub n_heads: usize,
    pub ff_dim: usize,
    /// The encoder has `n_enc_layers − 1` blocks.
    pub n_enc_layers: usize,
    /// The decoder has `n_dec_layers − 1` blocks.
    pub n_dec_layers: usize,
    pub ffn_dropout_p: f64,
    pub attn_dropout_p: f64,
    pub resid_dropout_p: f64,
    pub s1_bits: usize,
    pub s2_bits: usize,
    /// The quantizer's training-loss weights (unused at inference).
    pub beta: f64,
    pub gamma0: f64,
    pub gamma: f64,
    pub zeta: f64,
    /// The quantizer's entropy group (`group_basis` has this many entries); `(s1_bits + s2_bits)` must be a
    /// multiple of it.
    pub group_size: usize,
}

/// A Kronos model: the predictor and its tokenizer, validated together. In manifests it is written as
/// `{"predictor": {...}, "tokenizer": {...}}`, and reading it back validates it again.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "RawPair")]
pub struct KronosConfig {
    pub predictor: PredictorConfig,
    pub tokenizer: TokenizerConfig,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPair {
    predictor: PredictorConfig,
    tokenizer: TokenizerConfig,
}

impl TryFrom<RawPair> for KronosConfig {
    type Error = Error;

    fn try_from(raw: RawPair) -> Result<Self> {
        KronosConfig::new(raw.predictor, raw.tokenizer)
    }
}

fn bad<T>(message: String) -> Result<T> {
    Err(Error::Config { message })
}

/// Every named size must be ≥ 1.
fn positive(sizes: &[(&str, usize)]) -> Result<()> {
    match sizes.iter().find(|(_, v)| *v == 0) {
        Some((name, _)) => bad(format!("{name} must be ≥ 1")),
        None => Ok(()),
    }
}

/// Dropout probabilities are kept as given (eval mode ignores them) but must be probabilities.
fn probabilities(values: &[(&str, f64)]) -> Result<()> {
    match values.iter().find(|(_, p)| !(0.0..1.0).contains(p)) {
        Some((name, p)) => bad(format!("{name} {p} must be in [0, 1)")),
        None => Ok(()),
    }
}

/// Equal halves: upstream's tokenizer decodes other splits into the wrong bits without an error.
fn equal_halves(s1: usize, s2: usize, whose: &str) -> Result<()> {
    if s1 == s2 {
        return Ok(());
    }
    bad(format!(
        "{whose} s1_bits {s1} ≠ s2_bits {s2}: Kronos's tokenizer decodes such tokens into the wrong bits without an \
         error (`indices_to_bits(half=True)` takes codebook_dim/2 bits for both halves); totoc exports only \
         s1_bits = s2_bits"
    ))
}

/// A head size the rotary embedding rotates by halves: `d_model` divisible into `heads` even heads.
fn even_heads(d_model: usize, heads: usize, whose: &str) -> Result<()> {
    if !d_model.is_multiple_of(heads) || !(d_model / heads).is_multiple_of(2) {
        return bad(format!(
            "{whose} d_model {d_model} does not split into {heads} heads of an even size (the rotary embedding \
             rotates each head by halves)"
        ));
    }
    Ok(())
}

impl PredictorConfig {
    /// Parses and validates the predictor's `config.json` text.
    pub fn from_json(text: &str) -> Result<Self> {
        let c: PredictorConfig = serde_json::from_str(text)
            .map_err(|e| Error::Config { message: format!("Kronos predictor: {e}") })?;
        c.validate()?;
        Ok(c)
    }

    pub fn validate(&self) -> Result<()> {
        positive(&[
            ("s1_bits", self.s1_bits),
            ("s2_bits", self.s2_bits),
            ("n_layers", self.n_layers),
            ("d_model", self.d_model),
            ("n_heads", self.n_heads),
            ("ff_dim", self.ff_dim),
        ])?;
        probabilities(&[
            ("ffn_dropout_p", self.ffn_dropout_p),
            ("attn_dropout_p", self.attn_dropout_p),
            ("resid_dropout_p", self.resid_dropout_p),
            ("token_dropout_p", self.token_dropout_p),
        ])?;
        equal_halves(self.s1_bits, self.s2_bits, "the predictor's")?;
        if self.s1_bits > MAX_BITS {
            return bad(format!(
                "s1_bits {} exceeds {MAX_BITS} (a vocabulary of 2^{MAX_BITS})",
                self.s1_bits
            ));
        }
        even_heads(self.d_model, self.n_heads, "the predictor's")?;
        even_heads(self.d_model, DEP_HEADS, "the predictor's dependency layer (always 4 heads):")
    }

    /// Query/key/value size of one transformer head.
    pub fn head_dim(&self) -> usize {
        self.d_model / self.n_heads
    }

    /// Size of one dependency-layer head (`d_model / 4`).
    pub fn dep_head_dim(&self) -> usize {
        self.d_model / DEP_HEADS
    }

    /// Entries of the s1 vocabulary (`2^s1_bits`).
    pub fn s1_vocab(&self) -> usize {
        1 << self.s1_bits
    }

    /// Entries of the s2 vocabulary (`2^s2_bits`).
    pub fn s2_vocab(&self) -> usize {
        1 << self.s2_bits
    }
}

impl TokenizerConfig {
    /// Parses and validates the tokenizer's `config.json` text.
    pub fn from_json(text: &str) -> Result<Self> {
        let c: TokenizerConfig = serde_json::from_str(text)
            .map_err(|e| Error::Config { message: format!("Kronos tokenizer: {e}") })?;
        c.validate()?;
        Ok(c)
    }

    pub fn validate(&self) -> Result<()> {
        positive(&[
            ("d_model", self.d_model),
            ("n_heads", self.n_heads),
            ("ff_dim", self.ff_dim),
            ("n_enc_layers", self.n_enc_layers),
            ("n_dec_layers", self.n_dec_layers),
            ("s1_bits", self.s1_bits),
            ("s2_bits", self.s2_bits),
            ("group_size", self.group_size),
        ])?;
        probabilities(&[
            ("ffn_dropout_p", self.ffn_dropout_p),
            ("attn_dropout_p", self.attn_dropout_p),
            ("resid_dropout_p", self.resid_dropout_p),
        ])?;
        if self.d_in != ROW_COLUMNS {
            return bad(format!(
                "the tokenizer's d_in {} must be {ROW_COLUMNS} (open, high, low, close, volume, amount)",
                self.d_in
            ));
        }
        equal_halves(self.s1_bits, self.s2_bits, "the tokenizer's")?;
        if self.s1_bits > MAX_BITS {
            return bad(format!(
                "s1_bits {} exceeds {MAX_BITS} (a vocabulary of 2^{MAX_BITS})",
                self.s1_bits
            ));
        }
        if !self.codebook_bits().is_multiple_of(self.group_size) {
            return bad(format!(
                "s1_bits + s2_bits = {} is not a multiple of group_size {} (upstream's quantizer asserts it)",
                self.codebook_bits(),
                self.group_size
            ));
        }
        for (name, v) in
            [("beta", self.beta), ("gamma0", self.gamma0), ("gamma", self.gamma), ("zeta", self.zeta)]
        {
            if !v.is_finite() {
                return bad(format!("{name} {v} must be a finite number"));
            }
        }
        even_heads(self.d_model, self.n_heads, "the tokenizer's")
    }

    /// Bits per row: `s1_bits + s2_bits` (the quantizer's `codebook_dim`).
    pub fn codebook_bits(&self) -> usize {
        self.s1_bits + self.s2_bits
    }

    /// Query/key/value size of one head.
    pub fn head_dim(&self) -> usize {
        self.d_model / self.n_heads
    }

    /// Encoder blocks (`n_enc_layers − 1`).
    pub fn encoder_blocks(&self) -> usize {
        self.n_enc_layers - 1
    }

    /// Decoder blocks (`n_dec_layers − 1`).
    pub fn decoder_blocks(&self) -> usize {
        self.n_dec_layers - 1
    }
}

impl KronosConfig {
    /// Both configs, each valid, whose token bits agree.
    pub fn new(predictor: PredictorConfig, tokenizer: TokenizerConfig) -> Result<Self> {
        predictor.validate()?;
        tokenizer.validate()?;
        let (p, t) = ((predictor.s1_bits, predictor.s2_bits), (tokenizer.s1_bits, tokenizer.s2_bits));
        if p != t {
            return bad(format!(
                "the predictor's tokens have s1_bits/s2_bits {}/{} but the tokenizer's {}/{}: give the tokenizer \
                 this predictor was trained with (--tokenizer)",
                p.0, p.1, t.0, t.1
            ));
        }
        Ok(KronosConfig { predictor, tokenizer })
    }

    /// The error for a predictor config read alone (`AnyConfig::from_json`): its model is both configs.
    pub fn needs_tokenizer() -> Error {
        Error::Config {
            message:
                "a Kronos predictor config is read together with its tokenizer's: load both directories \
                      (`KronosCheckpoint::load`; `totoc export --checkpoint PREDICTOR --tokenizer TOKENIZER`)"
                    .into(),
        }
    }

    /// Bits per token half (`s1_bits = s2_bits`).
    pub fn bits(&self) -> usize {
        self.predictor.s1_bits
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Kronos-small's predictor config (NeoQuasar/Kronos-small, as `save_pretrained` writes it).
    pub(crate) fn small_json() -> String {
        r#"{"attn_dropout_p": 0.1, "d_model": 512, "ff_dim": 1024, "ffn_dropout_p": 0.25, "learn_te": true,
        "n_heads": 8, "n_layers": 8, "resid_dropout_p": 0.25, "s1_bits": 10, "s2_bits": 10, "token_dropout_p": 0.1}"#
            .to_string()
    }

    /// Kronos-Tokenizer-base's config (group_size 4; Tokenizer-2k differs only in group_size 5).
    pub(crate) fn tokenizer_base_json() -> String {
        r#"{"attn_dropout_p": 0.0, "beta": 0.05, "d_in": 6, "d_model": 256, "ff_dim": 512, "ffn_dropout_p": 0.0,
        "gamma": 1.1, "gamma0": 1.0, "group_size": 4, "n_dec_layers": 4, "n_enc_layers": 4, "n_heads": 4,
        "resid_dropout_p": 0.0, "s1_bits": 10, "s2_bits": 10, "zeta": 0.05}"#
            .to_string()
    }

    fn pair(p: &str, t: &str) -> Result<KronosConfig> {
        KronosConfig::new(PredictorConfig::from_json(p)?, TokenizerConfig::from_json(t)?)
    }

    #[test]
    fn published_small_and_tokenizer_base_parse_and_round_trip() {
        let c = pair(&small_json(), &tokenizer_base_json()).unwrap();
        assert_eq!(
            (c.predictor.head_dim(), c.predictor.dep_head_dim(), c.predictor.s1_vocab()),
            (64, 128, 1024)
        );
        assert_eq!((c.tokenizer.encoder_blocks(), c.tokenizer.decoder_blocks(), c.bits()), (3, 3, 10));
        let json = serde_json::to_string(&c).unwrap();
        assert_eq!(serde_json::from_str::<KronosConfig>(&json).unwrap(), c);
        // reading a manifest's config validates it again
        let bad = json.replace("\"s2_bits\":10", "\"s2_bits\":8");
        assert!(serde_json::from_str::<KronosConfig>(&bad).unwrap_err().to_string().contains("s2_bits"));
        // Tokenizer-2k: group_size 5
        pair(&small_json(), &tokenizer_base_json().replace("\"group_size\": 4", "\"group_size\": 5"))
            .unwrap();
    }

    #[test]
    fn unknown_and_missing_keys_are_named() {
        let e = PredictorConfig::from_json(
            &small_json().replace("\"n_heads\"", "\"rope_theta\": 1, \"n_heads\""),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("unknown field `rope_theta`"), "{e}");
        let e = PredictorConfig::from_json(&small_json().replace("\"learn_te\": true,", ""))
            .unwrap_err()
            .to_string();
        assert!(e.contains("missing field `learn_te`"), "{e}");
        let e = TokenizerConfig::from_json(
            &tokenizer_base_json().replace("\"zeta\": 0.05", "\"zeta\": 0.05, \"x\": 1"),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("Kronos tokenizer") && e.contains("unknown field `x`"), "{e}");
        let e = TokenizerConfig::from_json(&tokenizer_base_json().replace("\"group_size\": 4,", ""))
            .unwrap_err()
            .to_string();
        assert!(e.contains("missing field `group_size`"), "{e}");
    }

    #[test]
    fn unequal_halves_and_mismatched_bits_are_refused_with_the_reason() {
        let e = PredictorConfig::from_json(&small_json().replace("\"s2_bits\": 10", "\"s2_bits\": 8"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("s1_bits 10 ≠ s2_bits 8") && e.contains("wrong bits"), "{e}");
        let t = tokenizer_base_json().replace("\"s1_bits\": 10", "\"s1_bits\": 4");
        let e = TokenizerConfig::from_json(&t).unwrap_err().to_string();
        assert!(e.contains("s1_bits 4 ≠ s2_bits 10"), "{e}");
        let t8 = tokenizer_base_json()
            .replace("\"s1_bits\": 10", "\"s1_bits\": 8")
            .replace("\"s2_bits\": 10", "\"s2_bits\": 8");
        let e = pair(&small_json(), &t8).unwrap_err().to_string();
        assert!(e.contains("10/10 but the tokenizer's 8/8") && e.contains("--tokenizer"), "{e}");
    }

    #[test]
    fn shapes_upstream_cannot_run_are_refused() {
        let e = |p: String| PredictorConfig::from_json(&p).unwrap_err().to_string();
        assert!(e(small_json().replace("\"n_heads\": 8", "\"n_heads\": 3")).contains("even size"));
        assert!(e(small_json()
            .replace("\"d_model\": 512", "\"d_model\": 516")
            .replace("\"n_heads\": 8", "\"n_heads\": 2"))
        .contains("dependency layer"));
        assert!(
            e(small_json().replace("\"n_layers\": 8", "\"n_layers\": 0")).contains("n_layers must be ≥ 1")
        );
        assert!(
            e(small_json().replace("\"ffn_dropout_p\": 0.25", "\"ffn_dropout_p\": 1.5")).contains("[0, 1)")
        );
        let t = |t: String| TokenizerConfig::from_json(&t).unwrap_err().to_string();
        assert!(t(tokenizer_base_json().replace("\"d_in\": 6", "\"d_in\": 5")).contains("must be 6"));
        assert!(t(tokenizer_base_json().replace("\"group_size\": 4", "\"group_size\": 3"))
            .contains("group_size 3"));
        assert!(t(tokenizer_base_json().replace("\"n_enc_layers\": 4", "\"n_enc_layers\": 0"))
            .contains("n_enc_layers"));
    }
}
