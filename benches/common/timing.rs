//! Timing shared by the benches: medians, and pieces of work sampled round-robin so that the
//! machine's drift (this 2-core VM moves by 20 % from one minute to the next) hits them alike.

use std::time::{Duration, Instant};

/// The `fraction` percentile of `latencies` (nearest rank; zero when there are none).
#[allow(dead_code)] // not every bench that times work reports percentiles
pub fn percentile(latencies: &[Duration], fraction: f64) -> Duration {
    let mut sorted = latencies.to_vec();
    sorted.sort();
    let index = ((sorted.len() as f64 - 1.0) * fraction).round() as usize;
    sorted.get(index).copied().unwrap_or_default()
}

/// A `--name N` flag of the bench's command line, else `default`.
#[allow(dead_code)] // not every bench takes flags
pub fn flag(args: &[String], name: &str, default: usize) -> usize {
    args.iter()
        .position(|arg| arg == name)
        .and_then(|at| args.get(at + 1))
        .and_then(|value| value.parse().ok())
        .unwrap_or(default)
}

pub fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

/// The median time of each piece of work over `rounds` rounds, one run of each per round, after
/// `warmups` unmeasured runs of each.
pub fn alternate<const N: usize>(
    rounds: usize,
    warmups: usize,
    mut works: [&mut dyn FnMut(); N],
) -> [Duration; N] {
    for work in works.iter_mut() {
        for _ in 0..warmups {
            work();
        }
    }
    let mut samples: [Vec<Duration>; N] = std::array::from_fn(|_| Vec::with_capacity(rounds));
    for _ in 0..rounds {
        for (work, samples) in works.iter_mut().zip(samples.iter_mut()) {
            let started = Instant::now();
            work();
            samples.push(started.elapsed());
        }
    }
    samples.map(median)
}
