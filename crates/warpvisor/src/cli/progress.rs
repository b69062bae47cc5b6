//! What the user sees while work happens: a progress bar while kernels compile (on a
//! terminal only), and the `--stats` report.

use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};

use super::errln;
use warpvisor::runner::RunStats;

/// Whether to print progress lines: asked for with `--progress`, or stderr is a terminal.
pub fn wanted(asked: bool) -> bool {
    use std::io::IsTerminal;
    asked || std::io::stderr().is_terminal()
}

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
    format!("{:.6} s", d.as_secs_f64())
}

/// Prints the `--stats` report on stderr: one line per phase, in seconds. After compilation
/// the phases do not overlap, and the `unaccounted` line is what they leave of the wall time.
pub fn print_stats(stats: &RunStats, jobs: usize, vms: u32) {
    let run = stats.after_compilation();
    let per_sec = if run.is_zero() {
        0.0
    } else {
        jobs as f64 / run.as_secs_f64()
    };
    let share = |d: Duration| {
        if run.is_zero() {
            0.0
        } else {
            100.0 * d.as_secs_f64() / run.as_secs_f64()
        }
    };
    errln!(
        "stats: {jobs} jobs on {vms} VMs in {} ({per_sec:.1} jobs/s after compilation)",
        secs(stats.wall)
    );
    errln!("  translate          {}", secs(stats.translate));
    errln!("  device compile     {}", secs(stats.device_compile));
    errln!("  allocation         {}", secs(stats.allocate));
    errln!("  instantiation      {}", secs(stats.instantiate));
    errln!(
        "  on-device execute  {} ({} launches)",
        secs(stats.execute),
        stats.launches
    );
    errln!("  transfers          {}", secs(stats.transfer));
    errln!(
        "  hypercall service  {} ({} calls; those served during execution, with direct calls, \
         count in its time)",
        secs(stats.hypercall_service),
        stats.hypercalls
    );
    errln!("  scheduling         {}", secs(stats.schedule));
    errln!("  host jobs          {}", secs(stats.host));
    errln!("  release            {}", secs(stats.release));
    errln!("  output             {}", secs(stats.output));
    errln!(
        "  unaccounted        {} ({:.1}% of {} after compilation)",
        secs(stats.unaccounted()),
        share(stats.unaccounted()),
        secs(run)
    );
    errln!(
        "  moved              {} bytes to / {} bytes from the device ({} per launch, {} transfers)",
        stats.bytes_to_device,
        stats.bytes_from_device,
        stats.bytes_per_launch(),
        stats.transfers
    );
    errln!(
        "  slow calls         {} (through the trampoline, or to the host), {} indirect calls, \
         {} live values saved",
        stats.slow_calls,
        stats.indirect_calls,
        stats.saved_words
    );
}
