//! GPU-sharing requests in pod annotations, compatible with KAI-Scheduler.
//!
//! A pod asks for part of one GPU device with an annotation instead of the
//! `nvidia.com/gpu` resource, and may restrict the GPU models it runs on:
//!
//! | key | value | result |
//! |---|---|---|
//! | `trainyard.io/gpu-fraction`, `gpu-fraction` (KAI) | decimal in (0, 1], at most 3 decimals | [`GpuShare::Fraction`] in milli-GPU |
//! | `trainyard.io/gpu-memory` | Kubernetes quantity (`20Gi`) | [`GpuShare::Memory`] in bytes |
//! | `gpu-memory` (KAI) | whole MiB (`4096`) | [`GpuShare::Memory`] in bytes |
//! | `trainyard.io/gpu-models` | comma-separated model names | sorted, deduplicated list |
//!
//! Everything here is a pure function of the annotation text; the user
//! documentation is `docs/gpu-sharing-requests.md`.

use std::collections::BTreeMap;

use trainyard_model::resources::{GPU_RESOURCE, MILLI_PER_GPU};

use crate::keys;
use crate::names::label_value_problem;
use crate::quantity::{QuantityError, parse_quantity};

const EXPECTED_FRACTION: &str = "expected a decimal fraction of one GPU, greater than 0 and at most 1, such as \"0.5\" or \"0.125\"";
const EXPECTED_MIB: &str = "expected a whole number of MiB greater than 0, such as \"4096\"";
const EXPECTED_QUANTITY: &str =
    "expected a memory quantity greater than 0, such as \"20Gi\" or \"4096Mi\"";
const EXPECTED_MODELS: &str = "expected comma-separated GPU model names as the node label nvidia.com/gpu.product gives them, such as \"NVIDIA-A100-SXM4-80GB,NVIDIA-H100-80GB-HBM3\"";

/// What is wrong with the value of one GPU-sharing annotation. The message
/// does not repeat the key; [`GpuAnnotationError`] adds it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum GpuAnnotationProblem {
    #[error("empty; {expected}")]
    Empty { expected: &'static str },
    #[error("{value:?} is not a decimal number; {EXPECTED_FRACTION}")]
    NotDecimal { value: String },
    #[error(
        "{value:?} has more than 3 decimal places; expected a whole number of thousandths of a GPU (milli-GPU), such as \"0.333\" (Trainyard does not round it)"
    )]
    TooPrecise { value: String },
    #[error("{value:?} is not greater than 0; {expected}")]
    NotPositive {
        value: String,
        expected: &'static str,
    },
    #[error(
        "{value:?} is more than one GPU; {EXPECTED_FRACTION} (request whole GPUs with the nvidia.com/gpu resource)"
    )]
    AboveOne { value: String },
    #[error(
        "{value:?} is not a whole number of MiB; {EXPECTED_MIB} (for a quantity such as \"4Gi\", use trainyard.io/gpu-memory)"
    )]
    NotMib { value: String },
    #[error("invalid quantity {value:?}; {EXPECTED_QUANTITY}")]
    NotQuantity { value: String },
    #[error("{value:?} is too large; expected less than 16Ei (2^64 bytes) of GPU memory")]
    TooLarge { value: String },
    #[error("{value:?} has an empty entry; {EXPECTED_MODELS}")]
    EmptyModel { value: String },
    #[error(
        "{problem} (GPU models are matched against the node label nvidia.com/gpu.product, such as \"NVIDIA-A100-SXM4-80GB\")"
    )]
    InvalidModel { problem: String },
    #[error(
        "{value:?} conflicts with {other_key}={other_value:?}; expected either a GPU fraction or a GPU memory amount, not both"
    )]
    FractionAndMemory {
        value: String,
        other_key: &'static str,
        other_value: String,
    },
    #[error(
        "{value:?} differs from {other_key}={other_value:?}; expected the same amount under both keys, or only one of them"
    )]
    SpellingsDiffer {
        value: String,
        other_key: &'static str,
        other_value: String,
    },
    #[error(
        "a GPU share cannot be combined with the {GPU_RESOURCE} resource, found {fields}; expected either this annotation (a share of one device) or {GPU_RESOURCE} (whole GPUs), not both"
    )]
    WithGpuResource { fields: String },
}

/// One problem with one GPU-sharing annotation of a pod.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("annotation {key}: {problem}")]
pub struct GpuAnnotationError {
    /// The annotation the problem is reported at, e.g. `gpu-fraction`.
    pub key: &'static str,
    pub problem: GpuAnnotationProblem,
}

/// A share of one GPU device asked for by annotation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GpuShare {
    /// `milli` milli-GPU (1..=1000) of one device, from `key`. 1000 is one
    /// whole GPU.
    Fraction { key: &'static str, milli: u64 },
    /// `bytes` (> 0) of one device's memory, from `key`.
    Memory { key: &'static str, bytes: u64 },
}

impl GpuShare {
    /// The annotation the share was read from (the Trainyard key when both
    /// spellings are given).
    pub fn key(&self) -> &'static str {
        match self {
            GpuShare::Fraction { key, .. } | GpuShare::Memory { key, .. } => key,
        }
    }
}

/// What a pod's GPU-sharing annotations ask for.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GpuSharingRequest {
    /// A fraction or memory share of one device; `None` without either
    /// annotation.
    pub share: Option<GpuShare>,
    /// `trainyard.io/gpu-models`: allowed models, sorted, no duplicates;
    /// empty means any model.
    pub models: Vec<String>,
    /// The value of `gpu-fraction-num-devices` when the pod asks for a share
    /// and the value is not `1`: a share spread over several devices, which
    /// Trainyard does not support.
    pub unsupported_num_devices: Option<String>,
}

/// Reads the GPU-sharing annotations of one pod.
///
/// `gpu_resources` lists the pod's `nvidia.com/gpu` requests and limits as
/// (field path, value), e.g.
/// `("spec.containers[0].resources.limits.nvidia.com/gpu", "1")`; a share
/// annotation together with any of them is an error. Every problem is
/// reported, each at the annotation concerned:
/// - a value that does not parse (see [`parse_gpu_fraction`],
///   [`parse_gpu_memory_quantity`], [`parse_kai_gpu_memory_mib`],
///   [`parse_gpu_models`]); empty values are errors, not absent;
/// - the Trainyard and KAI spellings of one amount with different values
///   (reported at the KAI key);
/// - a fraction and a memory amount on one pod (reported at the memory key);
/// - a share with an `nvidia.com/gpu` resource (reported at the share key).
pub fn gpu_sharing_request(
    annotations: &BTreeMap<String, String>,
    gpu_resources: &[(String, String)],
) -> Result<GpuSharingRequest, Vec<GpuAnnotationError>> {
    let mut errors = Vec::new();
    let fraction = read_amount(
        annotations,
        &mut errors,
        [
            (keys::GPU_FRACTION, parse_gpu_fraction),
            (keys::KAI_GPU_FRACTION, parse_gpu_fraction),
        ],
    );
    let memory = read_amount(
        annotations,
        &mut errors,
        [
            (keys::GPU_MEMORY, parse_gpu_memory_quantity),
            (keys::KAI_GPU_MEMORY_MIB, parse_kai_gpu_memory_mib),
        ],
    );
    if let (Some((fk, fv)), Some((mk, mv))) = (&fraction.first, &memory.first) {
        errors.push(GpuAnnotationError {
            key: mk,
            problem: GpuAnnotationProblem::FractionAndMemory {
                value: mv.to_string(),
                other_key: fk,
                other_value: fv.to_string(),
            },
        });
    }
    if let Some((key, _)) = fraction.first.or(memory.first)
        && !gpu_resources.is_empty()
    {
        let fields: Vec<String> = gpu_resources
            .iter()
            .map(|(path, v)| format!("{path}={v:?}"))
            .collect();
        errors.push(GpuAnnotationError {
            key,
            problem: GpuAnnotationProblem::WithGpuResource {
                fields: fields.join(", "),
            },
        });
    }
    let models = match annotations.get(keys::GPU_MODELS) {
        None => Vec::new(),
        Some(v) => parse_gpu_models(v).unwrap_or_else(|problem| {
            errors.push(GpuAnnotationError {
                key: keys::GPU_MODELS,
                problem,
            });
            Vec::new()
        }),
    };
    if !errors.is_empty() {
        return Err(errors);
    }
    let share = match (fraction.value, memory.value) {
        (Some((key, milli)), _) => Some(GpuShare::Fraction { key, milli }),
        (None, Some((key, bytes))) => Some(GpuShare::Memory { key, bytes }),
        (None, None) => None,
    };
    let unsupported_num_devices = annotations
        .get(keys::KAI_GPU_FRACTION_NUM_DEVICES)
        .filter(|v| share.is_some() && v.trim() != "1")
        .cloned();
    Ok(GpuSharingRequest {
        share,
        models,
        unsupported_num_devices,
    })
}

/// One amount that may be given under two keys.
struct Amount<'a> {
    /// The first key present, with its raw value.
    first: Option<(&'static str, &'a str)>,
    /// The parsed amount and its key, when every present key parsed and
    /// they agree.
    value: Option<(&'static str, u64)>,
}

type Parser = fn(&str) -> Result<u64, GpuAnnotationProblem>;

fn read_amount<'a>(
    annotations: &'a BTreeMap<String, String>,
    errors: &mut Vec<GpuAnnotationError>,
    spellings: [(&'static str, Parser); 2],
) -> Amount<'a> {
    let mut first = None;
    let mut parsed: Option<(&'static str, &'a str, u64)> = None;
    let mut ok = true;
    for (key, parse) in spellings {
        let Some(raw) = annotations.get(key) else {
            continue;
        };
        first.get_or_insert((key, raw.as_str()));
        match parse(raw) {
            Err(problem) => {
                ok = false;
                errors.push(GpuAnnotationError { key, problem });
            }
            Ok(v) => match parsed {
                None => parsed = Some((key, raw, v)),
                Some((other_key, other_raw, other)) if other != v => {
                    ok = false;
                    errors.push(GpuAnnotationError {
                        key,
                        problem: GpuAnnotationProblem::SpellingsDiffer {
                            value: raw.clone(),
                            other_key,
                            other_value: other_raw.to_string(),
                        },
                    });
                }
                Some(_) => {}
            },
        }
    }
    Amount {
        first,
        value: parsed.filter(|_| ok).map(|(k, _, v)| (k, v)),
    }
}

/// Parses a GPU fraction (`gpu-fraction`, `trainyard.io/gpu-fraction`) to
/// milli-GPU: a plain decimal greater than 0 and at most 1, such as `0.5`,
/// `.25` or `1.0`, with at most 3 significant decimals (`0.1250` is fine,
/// `0.1255` is an error, never rounded). Surrounding spaces are ignored; an
/// exponent, `NaN` or an empty value is an error.
pub fn parse_gpu_fraction(value: &str) -> Result<u64, GpuAnnotationProblem> {
    let v = value.trim();
    if v.is_empty() {
        return Err(GpuAnnotationProblem::Empty {
            expected: EXPECTED_FRACTION,
        });
    }
    let (negative, body) = match (v.strip_prefix('-'), v.strip_prefix('+')) {
        (Some(rest), _) => (true, rest),
        (None, Some(rest)) => (false, rest),
        (None, None) => (false, v),
    };
    let (int, frac) = body.split_once('.').unwrap_or((body, ""));
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if (int.is_empty() && frac.is_empty()) || !digits(int) || !digits(frac) {
        return Err(GpuAnnotationProblem::NotDecimal {
            value: value.to_string(),
        });
    }
    let int = int.trim_start_matches('0');
    let frac = frac.trim_end_matches('0');
    if negative || (int.is_empty() && frac.is_empty()) {
        return Err(GpuAnnotationProblem::NotPositive {
            value: value.to_string(),
            expected: EXPECTED_FRACTION,
        });
    }
    // `int` has no leading zeros: the value is at most 1 only as "" or as
    // "1" without a fraction.
    let above_one = match int {
        "" => false,
        "1" => !frac.is_empty(),
        _ => true,
    };
    if above_one {
        return Err(GpuAnnotationProblem::AboveOne {
            value: value.to_string(),
        });
    }
    if frac.len() > 3 {
        return Err(GpuAnnotationProblem::TooPrecise {
            value: value.to_string(),
        });
    }
    if int == "1" {
        return Ok(MILLI_PER_GPU);
    }
    // At most 3 digits, so this is below 1000 and parses.
    let thousandths = format!("{frac:0<3}");
    thousandths
        .parse::<u64>()
        .map_err(|_| GpuAnnotationProblem::NotDecimal {
            value: value.to_string(),
        })
}

/// Parses KAI's `gpu-memory` (whole MiB, digits only, such as `4096`) to
/// bytes. Zero, a sign, a decimal point or a unit suffix is an error.
pub fn parse_kai_gpu_memory_mib(value: &str) -> Result<u64, GpuAnnotationProblem> {
    let v = value.trim();
    if v.is_empty() {
        return Err(GpuAnnotationProblem::Empty {
            expected: EXPECTED_MIB,
        });
    }
    let all_digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if let Some(rest) = v.strip_prefix('-')
        && all_digits(rest)
    {
        return Err(GpuAnnotationProblem::NotPositive {
            value: value.to_string(),
            expected: EXPECTED_MIB,
        });
    }
    if !all_digits(v) {
        return Err(GpuAnnotationProblem::NotMib {
            value: value.to_string(),
        });
    }
    let too_large = || GpuAnnotationProblem::TooLarge {
        value: value.to_string(),
    };
    let mib: u64 = v.parse().map_err(|_| too_large())?;
    if mib == 0 {
        return Err(GpuAnnotationProblem::NotPositive {
            value: value.to_string(),
            expected: EXPECTED_MIB,
        });
    }
    mib.checked_mul(1 << 20).ok_or_else(too_large)
}

/// Parses `trainyard.io/gpu-memory`, a Kubernetes quantity such as `20Gi`,
/// `4096Mi` or `16G`, to bytes (rounded up, like the `memory` resource). A
/// bare number is bytes. Zero is an error.
pub fn parse_gpu_memory_quantity(value: &str) -> Result<u64, GpuAnnotationProblem> {
    let v = value.trim();
    if v.is_empty() {
        return Err(GpuAnnotationProblem::Empty {
            expected: EXPECTED_QUANTITY,
        });
    }
    let problem = |e: QuantityError| match e {
        QuantityError::Empty => GpuAnnotationProblem::Empty {
            expected: EXPECTED_QUANTITY,
        },
        QuantityError::Negative(_) => GpuAnnotationProblem::NotPositive {
            value: value.to_string(),
            expected: EXPECTED_QUANTITY,
        },
        QuantityError::Overflow(_) => GpuAnnotationProblem::TooLarge {
            value: value.to_string(),
        },
        QuantityError::Invalid(_) | QuantityError::NotWhole(_) => {
            GpuAnnotationProblem::NotQuantity {
                value: value.to_string(),
            }
        }
    };
    let bytes = parse_quantity(v)
        .and_then(|q| q.to_units_ceil())
        .map_err(problem)?;
    if bytes == 0 {
        return Err(GpuAnnotationProblem::NotPositive {
            value: value.to_string(),
            expected: EXPECTED_QUANTITY,
        });
    }
    Ok(bytes)
}

/// Parses `trainyard.io/gpu-models`: comma-separated model names, each
/// trimmed and a valid label value (as the node label
/// `nvidia.com/gpu.product` is); returned sorted, without duplicates. An
/// empty value or entry is an error.
pub fn parse_gpu_models(value: &str) -> Result<Vec<String>, GpuAnnotationProblem> {
    if value.trim().is_empty() {
        return Err(GpuAnnotationProblem::Empty {
            expected: EXPECTED_MODELS,
        });
    }
    let mut models = Vec::new();
    for part in value.split(',') {
        let m = part.trim();
        if m.is_empty() {
            return Err(GpuAnnotationProblem::EmptyModel {
                value: value.to_string(),
            });
        }
        if let Some(problem) = label_value_problem(m) {
            return Err(GpuAnnotationProblem::InvalidModel { problem });
        }
        models.push(m.to_string());
    }
    models.sort();
    models.dedup();
    Ok(models)
}

/// The nominal milli-GPU share of a request for `memory_bytes` of device
/// memory, measured against a device with `device_memory_bytes`:
/// `ceil(memory_bytes × 1000 / device_memory_bytes)`, clamped to 1..=1000.
/// An unknown device memory (0) gives 1000, one whole GPU.
pub fn nominal_gpu_share(memory_bytes: u64, device_memory_bytes: u64) -> u64 {
    if device_memory_bytes == 0 {
        return MILLI_PER_GPU;
    }
    let milli = (u128::from(memory_bytes) * u128::from(MILLI_PER_GPU))
        .div_ceil(u128::from(device_memory_bytes));
    // Clamped to at most 1000, so the conversion is exact.
    milli.clamp(1, u128::from(MILLI_PER_GPU)) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: u64 = 1 << 30;
    const MIB: u64 = 1 << 20;

    fn ann(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn errors(pairs: &[(&str, &str)], resources: &[(String, String)]) -> Vec<String> {
        gpu_sharing_request(&ann(pairs), resources)
            .unwrap_err()
            .iter()
            .map(|e| e.to_string())
            .collect()
    }

    #[test]
    fn fractions() {
        for (text, milli) in [
            ("0.5", 500),
            (".5", 500),
            ("0.125", 125),
            ("0.1250", 125),
            ("0.001", 1),
            ("0.999", 999),
            ("1", 1000),
            ("1.0", 1000),
            ("1.000", 1000),
            ("1.", 1000),
            ("01", 1000),
            ("+0.25", 250),
            (" 0.5 ", 500),
        ] {
            assert_eq!(parse_gpu_fraction(text), Ok(milli), "{text}");
        }
    }

    #[test]
    fn bad_fractions() {
        use GpuAnnotationProblem as P;
        for text in [
            "abc", "NaN", "nan", "inf", "5e-1", "0,5", ".", "0.5.1", "1/2", "--1",
        ] {
            assert_eq!(
                parse_gpu_fraction(text),
                Err(P::NotDecimal { value: text.into() }),
                "{text}"
            );
        }
        for text in ["0", "0.0", "-0", "-0.5", ".000"] {
            assert!(
                matches!(parse_gpu_fraction(text), Err(P::NotPositive { .. })),
                "{text}"
            );
        }
        for text in ["1.5", "1.0001", "2", "10", "99999999999999999999999"] {
            assert_eq!(
                parse_gpu_fraction(text),
                Err(P::AboveOne { value: text.into() }),
                "{text}"
            );
        }
        for text in ["0.3333", "0.0005", "0.12345"] {
            assert_eq!(
                parse_gpu_fraction(text),
                Err(P::TooPrecise { value: text.into() }),
                "{text}"
            );
        }
        assert!(matches!(parse_gpu_fraction(""), Err(P::Empty { .. })));
        assert!(matches!(parse_gpu_fraction("  "), Err(P::Empty { .. })));
        assert_eq!(
            parse_gpu_fraction("0.3333").unwrap_err().to_string(),
            "\"0.3333\" has more than 3 decimal places; expected a whole number of thousandths of a GPU (milli-GPU), such as \"0.333\" (Trainyard does not round it)"
        );
        assert_eq!(
            parse_gpu_fraction("1.5").unwrap_err().to_string(),
            "\"1.5\" is more than one GPU; expected a decimal fraction of one GPU, greater than 0 and at most 1, such as \"0.5\" or \"0.125\" (request whole GPUs with the nvidia.com/gpu resource)"
        );
        assert_eq!(
            parse_gpu_fraction("0").unwrap_err().to_string(),
            "\"0\" is not greater than 0; expected a decimal fraction of one GPU, greater than 0 and at most 1, such as \"0.5\" or \"0.125\""
        );
        assert_eq!(
            parse_gpu_fraction("").unwrap_err().to_string(),
            "empty; expected a decimal fraction of one GPU, greater than 0 and at most 1, such as \"0.5\" or \"0.125\""
        );
    }

    #[test]
    fn kai_memory_is_mib() {
        assert_eq!(parse_kai_gpu_memory_mib("4096"), Ok(4 * GIB));
        assert_eq!(parse_kai_gpu_memory_mib(" 1 "), Ok(MIB));
        assert_eq!(
            parse_kai_gpu_memory_mib("17592186044415"),
            Ok(17_592_186_044_415 << 20)
        );
        use GpuAnnotationProblem as P;
        for text in ["4Gi", "4096Mi", "1.5", "+4", "x", "4 096"] {
            assert_eq!(
                parse_kai_gpu_memory_mib(text),
                Err(P::NotMib { value: text.into() }),
                "{text}"
            );
        }
        for text in ["0", "-4", "000"] {
            assert!(
                matches!(parse_kai_gpu_memory_mib(text), Err(P::NotPositive { .. })),
                "{text}"
            );
        }
        for text in ["17592186044416", "99999999999999999999999"] {
            assert_eq!(
                parse_kai_gpu_memory_mib(text),
                Err(P::TooLarge { value: text.into() }),
                "{text}"
            );
        }
        assert!(matches!(parse_kai_gpu_memory_mib(""), Err(P::Empty { .. })));
        assert_eq!(
            parse_kai_gpu_memory_mib("4Gi").unwrap_err().to_string(),
            "\"4Gi\" is not a whole number of MiB; expected a whole number of MiB greater than 0, such as \"4096\" (for a quantity such as \"4Gi\", use trainyard.io/gpu-memory)"
        );
    }

    #[test]
    fn memory_quantities() {
        assert_eq!(parse_gpu_memory_quantity("20Gi"), Ok(20 * GIB));
        assert_eq!(parse_gpu_memory_quantity("4096Mi"), Ok(4 * GIB));
        assert_eq!(parse_gpu_memory_quantity("16G"), Ok(16_000_000_000));
        assert_eq!(parse_gpu_memory_quantity("1.5Gi"), Ok(GIB + GIB / 2));
        assert_eq!(parse_gpu_memory_quantity("1024"), Ok(1024), "bytes");
        assert_eq!(parse_gpu_memory_quantity("0.5"), Ok(1), "rounded up");
        use GpuAnnotationProblem as P;
        for text in ["0", "0Gi", "-1Gi"] {
            assert!(
                matches!(parse_gpu_memory_quantity(text), Err(P::NotPositive { .. })),
                "{text}"
            );
        }
        for text in ["20GiB", "lots", "1 Gi"] {
            assert_eq!(
                parse_gpu_memory_quantity(text),
                Err(P::NotQuantity { value: text.into() }),
                "{text}"
            );
        }
        assert_eq!(
            parse_gpu_memory_quantity("16Ei"),
            Err(P::TooLarge {
                value: "16Ei".into()
            })
        );
        assert!(matches!(
            parse_gpu_memory_quantity(""),
            Err(P::Empty { .. })
        ));
        assert_eq!(
            parse_gpu_memory_quantity("20GiB").unwrap_err().to_string(),
            "invalid quantity \"20GiB\"; expected a memory quantity greater than 0, such as \"20Gi\" or \"4096Mi\""
        );
        assert_eq!(
            parse_gpu_memory_quantity("-1Gi").unwrap_err().to_string(),
            "\"-1Gi\" is not greater than 0; expected a memory quantity greater than 0, such as \"20Gi\" or \"4096Mi\""
        );
    }

    #[test]
    fn models() {
        assert_eq!(
            parse_gpu_models(
                " NVIDIA-H100-80GB-HBM3, NVIDIA-A100-SXM4-80GB ,NVIDIA-H100-80GB-HBM3"
            ),
            Ok(vec![
                "NVIDIA-A100-SXM4-80GB".to_string(),
                "NVIDIA-H100-80GB-HBM3".to_string()
            ])
        );
        assert_eq!(parse_gpu_models("A100"), Ok(vec!["A100".to_string()]));
        use GpuAnnotationProblem as P;
        for text in ["a,,b", "a,", ",a", "a, ,b"] {
            assert_eq!(
                parse_gpu_models(text),
                Err(P::EmptyModel { value: text.into() }),
                "{text}"
            );
        }
        assert!(matches!(parse_gpu_models(" "), Err(P::Empty { .. })));
        assert_eq!(
            parse_gpu_models("NVIDIA A100-SXM4-80GB")
                .unwrap_err()
                .to_string(),
            "\"NVIDIA A100-SXM4-80GB\" is not a valid label value; expected letters, digits, '-', '_' and '.', starting and ending with a letter or digit (GPU models are matched against the node label nvidia.com/gpu.product, such as \"NVIDIA-A100-SXM4-80GB\")"
        );
        assert_eq!(
            parse_gpu_models("a,,b").unwrap_err().to_string(),
            "\"a,,b\" has an empty entry; expected comma-separated GPU model names as the node label nvidia.com/gpu.product gives them, such as \"NVIDIA-A100-SXM4-80GB,NVIDIA-H100-80GB-HBM3\""
        );
    }

    #[test]
    fn requests() {
        let none = gpu_sharing_request(&ann(&[("other", "x")]), &[]).unwrap();
        assert_eq!(none, GpuSharingRequest::default());

        let r = gpu_sharing_request(&ann(&[("gpu-fraction", "0.5")]), &[]).unwrap();
        assert_eq!(
            r.share,
            Some(GpuShare::Fraction {
                key: "gpu-fraction",
                milli: 500
            })
        );
        // Both spellings with the same amount: the Trainyard key is named.
        let r = gpu_sharing_request(
            &ann(&[
                ("gpu-fraction", "0.50"),
                ("trainyard.io/gpu-fraction", ".5"),
                ("trainyard.io/gpu-models", "b,a"),
            ]),
            &[],
        )
        .unwrap();
        assert_eq!(
            r.share,
            Some(GpuShare::Fraction {
                key: "trainyard.io/gpu-fraction",
                milli: 500
            })
        );
        assert_eq!(r.models, ["a", "b"]);
        let r = gpu_sharing_request(
            &ann(&[("gpu-memory", "4096"), ("trainyard.io/gpu-memory", "4Gi")]),
            &[],
        )
        .unwrap();
        assert_eq!(
            r.share,
            Some(GpuShare::Memory {
                key: "trainyard.io/gpu-memory",
                bytes: 4 * GIB
            })
        );
        assert_eq!(r.share.unwrap().key(), "trainyard.io/gpu-memory");
        // Models alone, with a whole-GPU resource.
        let r = gpu_sharing_request(
            &ann(&[("trainyard.io/gpu-models", "A100")]),
            &[(
                "spec.containers[0].resources.limits.nvidia.com/gpu".into(),
                "2".into(),
            )],
        )
        .unwrap();
        assert_eq!((r.share, r.models), (None, vec!["A100".to_string()]));

        // Multi-device shares are reported, not parsed.
        let r = gpu_sharing_request(
            &ann(&[("gpu-fraction", "0.5"), ("gpu-fraction-num-devices", "2")]),
            &[],
        )
        .unwrap();
        assert_eq!(r.unsupported_num_devices.as_deref(), Some("2"));
        let r = gpu_sharing_request(
            &ann(&[("gpu-fraction", "0.5"), ("gpu-fraction-num-devices", "1")]),
            &[],
        )
        .unwrap();
        assert_eq!(r.unsupported_num_devices, None);
        let r = gpu_sharing_request(&ann(&[("gpu-fraction-num-devices", "2")]), &[]).unwrap();
        assert_eq!(
            r.unsupported_num_devices, None,
            "no share, nothing to spread"
        );
    }

    #[test]
    fn conflicts() {
        assert_eq!(
            errors(&[("gpu-fraction", "0.5"), ("gpu-memory", "4096")], &[]),
            [
                "annotation gpu-memory: \"4096\" conflicts with gpu-fraction=\"0.5\"; expected either a GPU fraction or a GPU memory amount, not both"
            ]
        );
        assert_eq!(
            errors(
                &[
                    ("gpu-fraction", "0.25"),
                    ("trainyard.io/gpu-fraction", "0.5")
                ],
                &[]
            ),
            [
                "annotation gpu-fraction: \"0.25\" differs from trainyard.io/gpu-fraction=\"0.5\"; expected the same amount under both keys, or only one of them"
            ]
        );
        assert_eq!(
            errors(
                &[("gpu-memory", "4096"), ("trainyard.io/gpu-memory", "5Gi")],
                &[]
            ),
            [
                "annotation gpu-memory: \"4096\" differs from trainyard.io/gpu-memory=\"5Gi\"; expected the same amount under both keys, or only one of them"
            ]
        );
        let resources = [
            (
                "spec.containers[0].resources.limits.nvidia.com/gpu".to_string(),
                "1".to_string(),
            ),
            (
                "spec.initContainers[0].resources.requests.nvidia.com/gpu".to_string(),
                "0".to_string(),
            ),
        ];
        assert_eq!(
            errors(&[("trainyard.io/gpu-memory", "20Gi")], &resources),
            [
                "annotation trainyard.io/gpu-memory: a GPU share cannot be combined with the nvidia.com/gpu resource, found spec.containers[0].resources.limits.nvidia.com/gpu=\"1\", spec.initContainers[0].resources.requests.nvidia.com/gpu=\"0\"; expected either this annotation (a share of one device) or nvidia.com/gpu (whole GPUs), not both"
            ]
        );
        // Every problem at once: a bad value, a conflict, a bad model list.
        let all = errors(
            &[
                ("gpu-fraction", "2"),
                ("trainyard.io/gpu-memory", "20Gi"),
                ("trainyard.io/gpu-models", ""),
            ],
            &resources[..1],
        );
        assert_eq!(all.len(), 4, "{all:#?}");
        assert!(all[0].starts_with("annotation gpu-fraction: \"2\" is more than one GPU"));
        assert!(all[1].starts_with(
            "annotation trainyard.io/gpu-memory: \"20Gi\" conflicts with gpu-fraction=\"2\""
        ));
        assert!(all[2].starts_with("annotation gpu-fraction: a GPU share cannot be combined"));
        assert!(all[3].starts_with("annotation trainyard.io/gpu-models: empty; expected"));
    }

    #[test]
    fn nominal_shares() {
        assert_eq!(nominal_gpu_share(40 * GIB, 80 * GIB), 500);
        assert_eq!(nominal_gpu_share(20 * GIB, 80 * GIB), 250);
        assert_eq!(nominal_gpu_share(1, 80 * GIB), 1, "rounded up");
        assert_eq!(nominal_gpu_share(10 * GIB, 30 * GIB), 334, "rounded up");
        assert_eq!(nominal_gpu_share(80 * GIB, 80 * GIB), 1000);
        assert_eq!(nominal_gpu_share(100 * GIB, 80 * GIB), 1000, "clamped");
        assert_eq!(nominal_gpu_share(u64::MAX, 1), 1000, "no overflow");
        assert_eq!(nominal_gpu_share(4 * GIB, 0), 1000, "unknown memory");
    }
}
