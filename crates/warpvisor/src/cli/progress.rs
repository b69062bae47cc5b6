//! What the user sees while work happens: a progress bar while kernels compile (on a
//! terminal only), and the `--stats` report.

use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};

use super::errln;
use warpvisor::runner::RunStats;

/// A progress bar over kernel partitions, shown once a build has more than one.
pub struct CompileProgress {
    bar: ProgressBar,
}

impl CompileProgress {
    /// A hidden bar for `backend`'s builds (drawn on stderr when it is a terminal).
    pub fn new(backend: &str) -> Self {
        let bar = ProgressBar::hidden();
        bar.set_message(format!("compiling kernel partitions ({backend})"));
        CompileProgress { bar }
    }

    /// `done` of `total` partitions are built.
    pub fn update(&self, done: usize, total: usize) {
        if total <= 1 {
            return;
        }
        if self.bar.is_hidden() && done == 0 {
            self.bar
                .set_draw_target(indicatif::ProgressDrawTarget::stderr());
            self.bar.set_length(total as u64);
            if let Ok(style) =
                ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len} {elapsed_precise}")
            {
                self.bar.set_style(style.progress_chars("=> "));
            }
            self.bar.enable_steady_tick(Duration::from_millis(200));
        }
        self.bar.set_position(done as u64);
    }

    /// Removes the bar.
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

fn secs(d: Duration) -> String {
    format!("{:.3} s", d.as_secs_f64())
}

/// Prints the `--stats` report on stderr.
pub fn print_stats(stats: &RunStats, jobs: usize, vms: u32) {
    let run = stats
        .wall
        .saturating_sub(stats.translate + stats.device_compile);
    let per_sec = if run.is_zero() {
        0.0
    } else {
        jobs as f64 / run.as_secs_f64()
    };
    errln!(
        "stats: {jobs} jobs on {vms} VMs in {} ({per_sec:.1} jobs/s after compilation)",
        secs(stats.wall)
    );
    errln!("  translate          {}", secs(stats.translate));
    errln!("  device compile     {}", secs(stats.device_compile));
    errln!(
        "  on-device execute  {} ({} launches)",
        secs(stats.execute),
        stats.launches
    );
    errln!("  transfers          {}", secs(stats.transfer));
    errln!(
        "  hypercall service  {} ({} calls)",
        secs(stats.hypercall_service),
        stats.hypercalls
    );
    errln!("  instantiation      {}", secs(stats.instantiate));
    errln!(
        "  continuations      {} slow calls, {} indirect calls, {} live values saved",
        stats.slow_calls,
        stats.indirect_calls,
        stats.saved_words
    );
}
