//! `trainyard simulate --forecast-eval`: the options of the forecasts'
//! evaluation, and its table and files.

use std::path::PathBuf;

use anyhow::{Context, Result};
use trainyard_sim::SimOutput;
use trainyard_sim::forecast::ForecastOptions;
use trainyard_sim::forecast::eval::{EvalOptions, Evaluation, errors};
use trainyard_sim::forecast::render::{errors_markdown, observations_csv};

use crate::simulate::{SimFormat, SimulateArgs, duration};

pub fn options(args: &SimulateArgs) -> Result<EvalOptions> {
    let horizon = duration(&args.forecast_horizon, "--forecast-horizon")?;
    let later = duration(&args.forecast_later, "--forecast-later")?;
    Ok(EvalOptions {
        forecast: ForecastOptions {
            samples: args.forecast_samples,
            horizon_seconds: horizon / 1000,
            stretch: args.forecast_stretch,
            ..ForecastOptions::default()
        },
        later_ms: later,
    })
}

/// Prints each evaluated run's error table (table output only) and, with
/// `--out`, writes forecasts.csv and forecast-errors.md beside its other
/// files.
pub fn report(
    results: &[(SimOutput, f64)],
    evaluations: &[Option<Evaluation>],
    args: &SimulateArgs,
) -> Result<()> {
    let several = results.len() > 1;
    for ((o, _), e) in results.iter().zip(evaluations) {
        let Some(e) = e else { continue };
        let table = errors_markdown(&errors(&e.observations));
        let head = format!(
            "Start-time forecasts, {}: {} forecasts ({} forward cycles) for {} jobs\n\n",
            o.policy,
            e.forecasts,
            e.forecast_cycles,
            e.observations.len()
        );
        if matches!(args.output, SimFormat::Table) {
            println!("\n{head}{table}");
        }
        if let Some(dir) = &args.out {
            let d: PathBuf = if several {
                dir.join(&o.policy)
            } else {
                dir.clone()
            };
            let write = |name: &str, text: &str| {
                let p = d.join(name);
                std::fs::write(&p, text).with_context(|| format!("{}: cannot write", p.display()))
            };
            write("forecasts.csv", &observations_csv(&e.observations))?;
            write("forecast-errors.md", &format!("{head}{table}"))?;
        }
    }
    Ok(())
}
