//! Figures and how they are printed: percentiles, CPU use, the result table, the machine.

use crate::process::{cpu_of, Gateway};
use std::time::{Duration, Instant};

/// Latency samples in microseconds.
#[derive(Default)]
pub struct Latencies(Vec<u32>);

impl Latencies {
    pub fn push(&mut self, d: Duration) {
        self.0.push(d.as_micros().min(u32::MAX as u128) as u32);
    }

    pub fn push_micros(&mut self, micros: u32) {
        self.0.push(micros);
    }

    pub fn extend(&mut self, other: Latencies) {
        self.0.extend(other.0);
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Sorts once; percentiles are read from the result.
    pub fn sorted(mut self) -> Sorted {
        self.0.sort_unstable();
        Sorted(self.0)
    }
}

pub struct Sorted(Vec<u32>);

impl Sorted {
    /// The `q` quantile (0..=1) in milliseconds; NaN without samples.
    pub fn ms(&self, q: f64) -> f64 {
        if self.0.is_empty() {
            return f64::NAN;
        }
        let i = ((q * self.0.len() as f64) as usize).min(self.0.len() - 1);
        f64::from(self.0[i]) / 1000.0
    }

    /// "p50 / p99 / max" in milliseconds.
    pub fn summary(&self) -> String {
        format!(
            "{:.2} / {:.2} / {:.2} ms",
            self.ms(0.5),
            self.ms(0.99),
            self.ms(1.0)
        )
    }
}

/// CPU used by this process and by the gateway over a measured phase, in % of one core
/// (this machine has few cores, and the load generator shares them with the gateway and
/// Postgres: its own share says how far the figures are limited by the generator).
pub struct CpuClock {
    wall: Instant,
    ours: Duration,
    gateway: Duration,
}

impl CpuClock {
    pub fn start(gateway: &Gateway) -> Self {
        CpuClock {
            wall: Instant::now(),
            ours: cpu_of("/proc/self/stat"),
            gateway: gateway.cpu(),
        }
    }

    /// "load generator N% · gateway M% (of one core)".
    pub fn finish(&self, gateway: &Gateway) -> String {
        let wall = self.wall.elapsed().as_secs_f64();
        let pct = |d: Duration| 100.0 * d.as_secs_f64() / wall;
        format!(
            "load generator {:.0}%, gateway {:.0}% (100% = one core)",
            pct(cpu_of("/proc/self/stat").saturating_sub(self.ours)),
            pct(gateway.cpu().saturating_sub(self.gateway))
        )
    }
}

struct Row {
    scenario: String,
    measure: String,
    result: String,
    target: String,
    verdict: &'static str,
}

/// The rows of the final table.
#[derive(Default)]
pub struct Table(Vec<Row>);

impl Table {
    pub fn new() -> Self {
        Self::default()
    }

    /// A figure without a target.
    pub fn info(&mut self, scenario: &str, measure: &str, result: impl Into<String>) {
        self.push(scenario, measure, result.into(), "", "");
    }

    /// A figure with a target, and whether it was met.
    pub fn target(
        &mut self,
        scenario: &str,
        measure: &str,
        result: impl Into<String>,
        target: &str,
        met: bool,
    ) {
        self.push(
            scenario,
            measure,
            result.into(),
            target,
            if met { "met" } else { "MISSED" },
        );
    }

    /// The row every view scenario ends with: sessions that fell behind (`reset`) and
    /// sessions whose polls failed (the first error shown), both expected to be none.
    pub fn resets_and_errors(&mut self, scenario: &str, resets: usize, errors: &[&String]) {
        self.target(
            scenario,
            "resets / errors",
            format!(
                "{resets} / {}{}",
                errors.len(),
                errors
                    .first()
                    .map(|e| format!(" ({e})"))
                    .unwrap_or_default()
            ),
            "0 / 0",
            resets == 0 && errors.is_empty(),
        );
    }

    pub fn failed(&mut self, scenario: &str, error: &str) {
        self.push(scenario, "scenario failed", error.to_string(), "", "FAILED");
    }

    fn push(
        &mut self,
        scenario: &str,
        measure: &str,
        result: String,
        target: &str,
        verdict: &'static str,
    ) {
        self.0.push(Row {
            scenario: scenario.to_string(),
            measure: measure.to_string(),
            result,
            target: target.to_string(),
            verdict,
        });
    }

    pub fn extend(&mut self, other: Table) {
        self.0.extend(other.0);
    }

    pub fn print(&self) {
        let header = Row {
            scenario: "scenario".into(),
            measure: "measure".into(),
            result: "result".into(),
            target: "target".into(),
            verdict: "",
        };
        let rows: Vec<&Row> = std::iter::once(&header).chain(&self.0).collect();
        let width = |f: fn(&Row) -> usize| rows.iter().map(|r| f(r)).max().unwrap_or(0);
        let w = [
            width(|r| r.scenario.chars().count()),
            width(|r| r.measure.chars().count()),
            width(|r| r.result.lines().next().unwrap_or("").chars().count()).min(90),
            width(|r| r.target.chars().count()),
        ];
        println!();
        for (i, r) in rows.iter().enumerate() {
            println!(
                "| {:<w0$} | {:<w1$} | {:<w2$} | {:<w3$} | {:<6} |",
                r.scenario,
                r.measure,
                r.result.lines().next().unwrap_or(""),
                r.target,
                r.verdict,
                w0 = w[0],
                w1 = w[1],
                w2 = w[2],
                w3 = w[3]
            );
            if i == 0 {
                println!(
                    "|{}|{}|{}|{}|--------|",
                    "-".repeat(w[0] + 2),
                    "-".repeat(w[1] + 2),
                    "-".repeat(w[2] + 2),
                    "-".repeat(w[3] + 2)
                );
            }
        }
        // A failure's explanation (a gateway log, say) goes below the table, whole.
        for r in self.0.iter().filter(|r| r.result.lines().count() > 1) {
            println!("\n{} — {}:\n{}", r.scenario, r.measure, r.result);
        }
    }
}

/// The machine: cores, load, CPU model, memory.
pub fn print_machine() {
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let load: Vec<&str> = load.split_whitespace().take(3).collect();
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|l| {
            l.strip_prefix("model name")?
                .split_once(':')
                .map(|(_, m)| m.trim())
        })
        .unwrap_or("unknown");
    let mem_gib = crate::process::status_kb("/proc/meminfo", "MemTotal") as f64 / 1048576.0;
    println!(
        "\nmachine: {cores} cores ({model}), {mem_gib:.1} GiB, load average {} (1, 5, 15 min)",
        load.join(" ")
    );
}

/// Per second, over `elapsed`.
pub fn rate(count: usize, elapsed: Duration) -> f64 {
    count as f64 / elapsed.as_secs_f64()
}
