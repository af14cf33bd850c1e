//! What the machine is and how busy it is, for the record beside a number.

/// The 1-, 5- and 15-minute load averages (`/proc/loadavg`), where Linux tells.
pub fn load_average() -> Option<[f64; 3]> {
    let text = std::fs::read_to_string("/proc/loadavg").ok()?;
    let mut it = text.split_whitespace().map(|f| f.parse::<f64>().ok());
    Some([it.next()??, it.next()??, it.next()??])
}

/// The CPU model name (`/proc/cpuinfo`), where Linux tells.
pub fn cpu_model() -> Option<String> {
    let text = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("model name"))?;
    Some(line.split_once(':')?.1.trim().to_string())
}

/// Peak resident memory of this process (`VmHWM`), in MiB, where Linux tells.
pub fn peak_rss_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}

/// One line naming the machine and its load, printed before results.
pub fn describe() -> String {
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let load = load_average().map_or_else(
        || "load unknown".to_string(),
        |[a, b, c]| format!("load average {a:.2} {b:.2} {c:.2}"),
    );
    format!(
        "machine: {} ({cores} cores available), {load}",
        cpu_model().unwrap_or_else(|| "CPU unknown".into())
    )
}

/// Least-squares slope of log(time) against log(size): the exponent `k` in
/// time ∝ size^k. `None` with fewer than two points or a zero.
pub fn fitted_exponent(points: &[(f64, f64)]) -> Option<f64> {
    if points.len() < 2 || points.iter().any(|&(x, y)| x <= 0.0 || y <= 0.0) {
        return None;
    }
    let logs: Vec<(f64, f64)> = points.iter().map(|&(x, y)| (x.ln(), y.ln())).collect();
    let n = logs.len() as f64;
    let mx = logs.iter().map(|p| p.0).sum::<f64>() / n;
    let my = logs.iter().map(|p| p.1).sum::<f64>() / n;
    let sxy: f64 = logs.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    let sxx: f64 = logs.iter().map(|p| (p.0 - mx).powi(2)).sum();
    (sxx > 0.0).then(|| sxy / sxx)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exponent_of_a_power_law() {
        let quadratic: Vec<(f64, f64)> = [1.0, 2.0, 5.0, 10.0]
            .iter()
            .map(|&x| (x, 3.0 * x * x))
            .collect();
        let k = fitted_exponent(&quadratic).unwrap();
        assert!((k - 2.0).abs() < 1e-9, "{k}");
        let linear = [(1000.0, 0.02), (2000.0, 0.04), (4000.0, 0.08)];
        assert!((fitted_exponent(&linear).unwrap() - 1.0).abs() < 1e-9);
        assert_eq!(fitted_exponent(&[(1.0, 1.0)]), None);
        assert_eq!(fitted_exponent(&[(1.0, 0.0), (2.0, 1.0)]), None);
    }
}
