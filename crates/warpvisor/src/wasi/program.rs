//! Running WASI programs on a fleet: one job per VM (arguments, environment, stdin), in
//! batches when there are more jobs than VMs, with each VM's output and exit status.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine as _;

use super::{link, WasiJob, WasiState};
use crate::jobs::JobError;
use crate::vmm::{Fleet, FleetConfig, FleetStats, Outcome, Program, TrapKind, VmmError};

/// Exit code reported for a trapped VM (wasmtime's on Unix: 128 + SIGABRT).
pub const TRAP_EXIT_CODE: u32 = 134;

/// How one job ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobResult {
    /// Exit code (0 when `_start` returned; [`TRAP_EXIT_CODE`] when it trapped).
    pub exit_code: u32,
    /// Standard output.
    pub stdout: Vec<u8>,
    /// Standard error.
    pub stderr: Vec<u8>,
    /// The trap, if the VM trapped.
    pub trap: Option<TrapKind>,
}

/// Settings of a WASI run.
#[derive(Debug, Clone)]
pub struct WasiRunConfig {
    /// Fleet settings.
    pub fleet: FleetConfig,
    /// `argv[0]` of every VM.
    pub program_name: String,
    /// Preopened directories `(host, guest)`.
    pub preopens: Vec<(PathBuf, String)>,
    /// Let calls to unknown imports trap instead of rejecting the module.
    pub allow_unknown_imports: bool,
}

/// Runs every job's `_start` on a fleet of `config.fleet.num_vms` VMs.
pub fn run_jobs(
    program: Arc<Program>,
    config: &WasiRunConfig,
    jobs: &[WasiJob],
) -> Result<Vec<JobResult>, VmmError> {
    run_jobs_with_stats(program, config, jobs).map(|(results, _)| results)
}

/// Where a WASI run's time went after compilation: the fleet's phases, and the host's work
/// around the fleet. The phases do not overlap.
#[derive(Debug, Clone, Copy, Default)]
pub struct WasiStats {
    /// The fleet's phases and traffic.
    pub fleet: FleetStats,
    /// The host's work around the fleet ([`WasiFleet::host_time`]): the WASI state and its
    /// imports, creating the fleet beyond allocating and instantiating it, each batch's
    /// arguments, environment and stdin, the exit codes and captured output.
    pub host: Duration,
    /// Releasing the fleet (its device storage and the WASI state) after the last batch.
    pub release: Duration,
}

/// [`run_jobs`], also telling where the time went.
pub fn run_jobs_with_stats(
    program: Arc<Program>,
    config: &WasiRunConfig,
    jobs: &[WasiJob],
) -> Result<(Vec<JobResult>, WasiStats), VmmError> {
    let mut fleet = WasiFleet::new(program, config)?;
    let start = Instant::now();
    let mut results = Vec::with_capacity(jobs.len());
    fleet.host += start.elapsed();
    for batch in jobs.chunks(fleet.num_vms() as usize) {
        let replies = fleet.run_batch(batch)?;
        let start = Instant::now();
        results.extend(replies);
        fleet.host += start.elapsed();
    }
    let mut stats = WasiStats {
        fleet: fleet.stats(),
        host: fleet.host_time(),
        release: Duration::ZERO,
    };
    let start = Instant::now();
    drop(fleet);
    stats.release = start.elapsed();
    Ok((results, stats))
}

/// A fleet that serves WASI jobs batch after batch: it is allocated once, and its VMs are
/// put back in their freshly instantiated state before every batch but the first.
pub struct WasiFleet {
    fleet: Fleet,
    state: Arc<Mutex<WasiState>>,
    fresh: bool,
    /// The host's work outside the fleet's phases so far ([`WasiFleet::host_time`]).
    host: Duration,
}

impl WasiFleet {
    /// A fleet of `config.fleet.num_vms` VMs running `program`'s `_start`.
    pub fn new(program: Arc<Program>, config: &WasiRunConfig) -> Result<Self, VmmError> {
        let start = Instant::now();
        let state = Arc::new(Mutex::new(WasiState::new(
            &config.program_name,
            config.preopens.clone(),
            config.fleet.num_vms,
        )?));
        let imports = link(&program.module, state.clone(), config.allow_unknown_imports)?;
        if !matches!(
            program.module.export("_start"),
            Some(crate::frontend::ExportKind::Func(_))
        ) {
            return Err(VmmError::NoSuchExport("_start".into()));
        }
        let fleet = Fleet::new(program, config.fleet, imports)?;
        // Creating the fleet's storage and instantiating it are the fleet's own phases; the
        // rest (the WASI state, the imports, the fleet's shapes and images) is the host's.
        let host = start.elapsed().saturating_sub(fleet.stats().accounted());
        Ok(WasiFleet {
            fleet,
            state,
            fresh: true,
            host,
        })
    }

    /// The fleet the jobs run on (tracing: `Fleet::take_trace` after each batch).
    pub fn fleet_mut(&mut self) -> &mut Fleet {
        &mut self.fleet
    }

    /// VMs in the fleet: the most jobs one batch may hold.
    pub fn num_vms(&self) -> u32 {
        self.fleet.num_vms()
    }

    /// Runs one batch of at most [`WasiFleet::num_vms`] jobs, job i on VM i.
    pub fn run_batch(&mut self, batch: &[WasiJob]) -> Result<Vec<JobResult>, VmmError> {
        if batch.len() > self.num_vms() as usize {
            return Err(VmmError::Limit(format!(
                "{} jobs in one batch for a fleet of {} VMs",
                batch.len(),
                self.num_vms()
            )));
        }
        if !self.fresh {
            self.fleet.reset()?;
        }
        self.fresh = false;
        let start = Instant::now();
        self.lock().set_jobs(batch);
        let entries = vec![Vec::new(); batch.len()];
        self.host += start.elapsed();
        let outcomes = self.fleet.invoke("_start", &entries)?;
        let start = Instant::now();
        let mut st = self.lock();
        let results = outcomes
            .into_iter()
            .enumerate()
            .map(|(vm, o)| {
                let out = st.take_output(vm);
                let (exit_code, trap) = match o {
                    Outcome::Returned(_) => (0, None),
                    Outcome::Exited(c) => (c, None),
                    Outcome::Trapped(k) => (TRAP_EXIT_CODE, Some(k)),
                };
                JobResult {
                    exit_code,
                    stdout: out.stdout,
                    stderr: out.stderr,
                    trap,
                }
            })
            .collect();
        drop(st);
        drop(entries);
        self.host += start.elapsed();
        Ok(results)
    }

    /// Serves `feed`'s jobs continuously until it ends serving: each VM takes a job when one
    /// is waiting and its next as soon as that one ended ([`super::continuous`]). Needs a
    /// kernel built with continuations.
    pub fn serve_continuously(
        &mut self,
        feed: &mut dyn super::continuous::JobFeed,
    ) -> Result<(), VmmError> {
        self.fresh = false;
        super::continuous::serve(&mut self.fleet, &self.state, feed)
    }

    /// Where the fleet's time went so far.
    pub fn stats(&self) -> FleetStats {
        self.fleet.stats()
    }

    /// The host's work outside the fleet's phases so far: the WASI state and its imports,
    /// creating the fleet beyond allocating and instantiating it, and each batch's jobs in
    /// (arguments, environment, stdin) and results out (exit codes, captured output).
    pub fn host_time(&self) -> Duration {
        self.host
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, WasiState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A WASI job line; keys other than these are an error.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct JobLine {
    #[serde(default, deserialize_with = "crate::jobs::present")]
    args: Option<serde_json::Value>,
    #[serde(default, deserialize_with = "crate::jobs::present")]
    env: Option<serde_json::Value>,
    #[serde(default, deserialize_with = "crate::jobs::present")]
    stdin: Option<serde_json::Value>,
    #[serde(default, deserialize_with = "crate::jobs::present")]
    stdin_base64: Option<serde_json::Value>,
}

/// Reads a job line `{"args": [...], "env": {...}, "stdin": "..." | "stdin_base64": "..."}`
/// (every key optional, no others).
pub fn parse_job(line: &str) -> Result<WasiJob, JobError> {
    use crate::jobs::json_kind;
    let line: JobLine = crate::jobs::parse_object(line)?;
    let mut job = WasiJob::default();
    if let Some(args) = &line.args {
        let args = args.as_array().ok_or_else(|| {
            JobError(format!(
                "\"args\" must be an array, not {}",
                json_kind(args)
            ))
        })?;
        for a in args {
            job.args.push(match a {
                serde_json::Value::String(s) => s.clone(),
                other => other.to_string(),
            });
        }
    }
    if let Some(env) = &line.env {
        let env = env.as_object().ok_or_else(|| {
            JobError(format!("\"env\" must be an object, not {}", json_kind(env)))
        })?;
        for (k, v) in env {
            let v = v.as_str().ok_or_else(|| {
                JobError(format!(
                    "env value of {k} must be a string, not {}",
                    json_kind(v)
                ))
            })?;
            job.env.push((k.clone(), v.to_string()));
        }
    }
    let string = |key: &str, v: &serde_json::Value| {
        v.as_str()
            .map(str::to_owned)
            .ok_or_else(|| JobError(format!("\"{key}\" must be a string, not {}", json_kind(v))))
    };
    match (&line.stdin, &line.stdin_base64) {
        (Some(_), Some(_)) => {
            return Err(JobError(
                "give \"stdin\" or \"stdin_base64\", not both".into(),
            ))
        }
        (Some(s), None) => job.stdin = string("stdin", s)?.into_bytes().into(),
        (None, Some(s)) => {
            job.stdin = base64::engine::general_purpose::STANDARD
                .decode(string("stdin_base64", s)?)
                .map_err(|e| JobError(format!("\"stdin_base64\": {e}")))?
                .into();
        }
        (None, None) => {}
    }
    Ok(job)
}

fn stream(name: &str, bytes: &[u8]) -> String {
    match std::str::from_utf8(bytes) {
        Ok(s) => format!("\"{name}\": {}", serde_json::Value::String(s.to_string())),
        Err(_) => format!(
            "\"{name}_base64\": \"{}\"",
            base64::engine::general_purpose::STANDARD.encode(bytes)
        ),
    }
}

/// The result line of job `job`.
pub fn result_line(job: usize, r: &JobResult) -> String {
    let trap = r.trap.map_or("null".to_string(), |k| format!("\"{k}\""));
    format!(
        "{{\"job\": {job}, \"exit_code\": {}, {}, {}, \"trap\": {trap}}}",
        r.exit_code,
        stream("stdout", &r.stdout),
        stream("stderr", &r.stderr)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn job_lines_parse_and_results_print() {
        let j =
            parse_job(r#"{"args": ["a", 2], "env": {"K": "V"}, "stdin_base64": "aGk="}"#).unwrap();
        assert_eq!(j.args, vec!["a".to_string(), "2".to_string()]);
        assert_eq!(j.env, vec![("K".to_string(), "V".to_string())]);
        assert_eq!(j.stdin.as_bytes(), Some(&b"hi"[..]));
        assert!(parse_job(r#"{"stdin": "x", "stdin_base64": "eA=="}"#).is_err());
        assert_eq!(parse_job("{}").unwrap(), WasiJob::default());
        let r = JobResult {
            exit_code: 3,
            stdout: b"ok\n".to_vec(),
            stderr: vec![0xff],
            trap: None,
        };
        assert_eq!(
            result_line(1, &r),
            r#"{"job": 1, "exit_code": 3, "stdout": "ok\n", "stderr_base64": "/w==", "trap": null}"#
        );
    }

    #[test]
    fn job_lines_must_be_objects_with_known_keys() {
        let err = |line: &str| parse_job(line).unwrap_err().to_string();
        assert_eq!(err("[1, 2]"), "expected a JSON object, found an array");
        assert_eq!(err("42"), "expected a JSON object, found a number");
        assert_eq!(err("null"), "expected a JSON object, found null");
        assert_eq!(
            err(r#"{"arg": ["a"]}"#),
            "unknown key `arg`, expected one of `args`, `env`, `stdin`, `stdin_base64`"
        );
        assert_eq!(
            err(r#"{"args": [], "Stdin": "x"}"#),
            "unknown key `Stdin`, expected one of `args`, `env`, `stdin`, `stdin_base64`"
        );
        assert_eq!(err(r#"{"env": {}, "env": {}}"#), "duplicate key `env`");
        assert_eq!(
            err(r#"{"args": null}"#),
            "\"args\" must be an array, not null"
        );
        assert_eq!(
            err(r#"{"env": []}"#),
            "\"env\" must be an object, not an array"
        );
        assert_eq!(
            err(r#"{"env": {"K": 1}}"#),
            "env value of K must be a string, not a number"
        );
        assert_eq!(
            err(r#"{"stdin": 5}"#),
            "\"stdin\" must be a string, not a number"
        );
    }
}
