//! `warpvisor serve` over real HTTP on loopback: each request its own reply, traps and exit
//! codes, the JSON envelope, and the limits (413, 429 with Retry-After, 504), and a clean stop
//! on SIGTERM.

mod http;

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use http::{Reply, Server};

/// Reads stdin; `!` first traps, `~` first loops (yielding) until stopped, `#` first exits 7
/// after the echo; anything else is echoed to stdout, with "e" on stderr.
const GUEST: &str = r#"
(module
  (import "wasi_snapshot_preview1" "fd_read" (func $fd_read (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "proc_exit" (func $proc_exit (param i32)))
  (import "wasi_snapshot_preview1" "sched_yield" (func $yield (result i32)))
  (memory (export "memory") 2)
  (func (export "_start")
    (local $len i32) (local $n i32)
    (block $eof
      (loop $more
        (i32.store (i32.const 0) (i32.add (i32.const 1024) (local.get $len)))
        (i32.store (i32.const 4) (i32.sub (i32.const 64512) (local.get $len)))
        (br_if $eof (call $fd_read (i32.const 0) (i32.const 0) (i32.const 1) (i32.const 8)))
        (local.set $n (i32.load (i32.const 8)))
        (br_if $eof (i32.eqz (local.get $n)))
        (local.set $len (i32.add (local.get $len) (local.get $n)))
        (br $more)))
    (if (i32.eq (i32.load8_u (i32.const 1024)) (i32.const 33)) (then unreachable))
    (if (i32.eq (i32.load8_u (i32.const 1024)) (i32.const 126))
      (then (loop $forever (drop (call $yield)) (br $forever))))
    (i32.store (i32.const 0) (i32.const 1024))
    (i32.store (i32.const 4) (local.get $len))
    (drop (call $fd_write (i32.const 1) (i32.const 0) (i32.const 1) (i32.const 8)))
    (i32.store8 (i32.const 16) (i32.const 101))
    (i32.store (i32.const 0) (i32.const 16))
    (i32.store (i32.const 4) (i32.const 1))
    (drop (call $fd_write (i32.const 2) (i32.const 0) (i32.const 1) (i32.const 8)))
    (if (i32.eq (i32.load8_u (i32.const 1024)) (i32.const 35))
      (then (call $proc_exit (i32.const 7))))))
"#;

fn guest_file() -> PathBuf {
    let guest = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("serve-guest.wat");
    std::fs::write(&guest, GUEST).expect("guest written");
    guest
}

/// `warpvisor serve` of the guest on `cpu` with `extra` flags.
fn start(extra: &[&str]) -> Server {
    start_on("cpu", extra)
}

fn start_on(backend: &str, extra: &[&str]) -> Server {
    Server::start_module(&guest_file(), backend, extra)
}

#[test]
fn every_request_gets_its_own_output_exit_code_or_trap() {
    every_request_answered(&[]);
}

#[test]
fn every_request_gets_its_own_output_when_served_continuously() {
    // Continuations: VMs take requests as they become free instead of in whole batches.
    every_request_answered(&["--calls", "continuations"]);
}

fn every_request_answered(mode: &[&str]) {
    let mut flags = vec![
        "--vms",
        "8",
        "--queue-depth",
        "64",
        "--max-batch-delay",
        "2",
    ];
    flags.extend(mode);
    let server = start(&flags);
    // 64 concurrent requests over a fleet of 8: batches of whatever arrived together.
    std::thread::scope(|s| {
        for i in 0..64 {
            let server = &server;
            s.spawn(move || {
                let body = format!("request {i}: {}", "x".repeat(i * 97));
                let r = server.post(body.as_bytes());
                assert_eq!(r.status, 200, "request {i}: {r:?}");
                assert_eq!(r.body, body.as_bytes(), "request {i}");
                assert_eq!(r.header("x-warpvisor-exit-code"), Some("0"));
                assert_eq!(r.header("x-warpvisor-stderr-bytes"), Some("1"));
            });
        }
    });
    let trapped = server.post(b"! trap please");
    assert_eq!(trapped.status, 500);
    assert_eq!(trapped.header("x-warpvisor-trap"), Some("unreachable"));
    assert_eq!(trapped.body, b"trapped: unreachable\n");
    let exited = server.post(b"# exit 7");
    assert_eq!(exited.status, 200);
    assert_eq!(exited.header("x-warpvisor-exit-code"), Some("7"));
    assert_eq!(exited.body, b"# exit 7");
    // The JSON envelope is the jobs runner's result line.
    let json = server.request("POST", "/run", b"hello", true);
    assert_eq!(json.status, 200);
    assert_eq!(json.header("content-type"), Some("application/json"));
    assert_eq!(
        String::from_utf8_lossy(&json.body).trim(),
        r#"{"job": 0, "exit_code": 0, "stdout": "hello", "stderr": "e", "trap": null}"#
    );
    // A VM that trapped is reset: the next request on the fleet is served.
    assert_eq!(server.post(b"after").body, b"after");
    let bad = server.request("POST", "/run?colour=red", b"", false);
    assert_eq!(bad.status, 400);
    let bad_env = server.request("POST", "/run?env=NO_EQUALS_SIGN", b"", false);
    assert_eq!(bad_env.status, 400);
    // Arguments and environment reach the job (the guest echoes stdin only; it must run).
    let with_args = server.request("POST", "/run?arg=a%20b&arg=c&env=K=V", b"args", false);
    assert_eq!(
        (with_args.status, with_args.body.as_slice()),
        (200, &b"args"[..])
    );
    assert_eq!(server.request("GET", "/healthz", b"", false).body, b"ok\n");
    assert_eq!(server.request("GET", "/readyz", b"", false).body, b"ok\n");
    // Every request so far was served: 64 + trap + exit + JSON + after + with_args.
    let metrics = String::from_utf8(server.request("GET", "/metrics", b"", false).body)
        .expect("metrics are text");
    assert!(
        metrics.contains("warpvisor_requests_served_total 69\n"),
        "{metrics}"
    );
    assert!(
        metrics.contains("warpvisor_requests_refused_total 0\n"),
        "{metrics}"
    );
    // A Prometheus text-format parser reads every family, the histograms included.
    let scrape = prometheus_parse::Scrape::parse(metrics.lines().map(|l| Ok(l.to_string())))
        .expect("metrics parse as Prometheus text");
    for family in [
        "warpvisor_requests_total",
        "warpvisor_request_duration_seconds",
        "warpvisor_batch_size",
        "warpvisor_batch_duration_seconds",
        "warpvisor_queue_depth",
        "warpvisor_vms_busy",
        "warpvisor_device_seconds_total",
        "warpvisor_kernel_launches_total",
        "warpvisor_hypercalls_total",
    ] {
        assert!(
            scrape.samples.iter().any(|s| s.metric == family),
            "{family} missing"
        );
    }
    // The fleet's device time: its kernels ran, and read stdin and wrote stdout by hypercalls.
    let value = |name: &str, phase: Option<&str>| -> f64 {
        let sample = scrape
            .samples
            .iter()
            .find(|s| s.metric == name && phase.is_none_or(|p| s.labels.get("phase") == Some(p)))
            .unwrap_or_else(|| panic!("{name} {phase:?} missing"));
        match sample.value {
            prometheus_parse::Value::Counter(v) | prometheus_parse::Value::Untyped(v) => v,
            ref other => panic!("{name}: {other:?}"),
        }
    };
    assert!(value("warpvisor_device_seconds_total", Some("execute")) > 0.0);
    assert!(value("warpvisor_device_seconds_total", Some("hypercall")) > 0.0);
    assert!(value("warpvisor_kernel_launches_total", None) >= 1.0);
    assert!(value("warpvisor_hypercalls_total", None) >= 69.0 * 2.0);
    // The OpenAPI description names every route and every status the server answers with.
    let api = server.request("GET", "/openapi.json", b"", false);
    serde_json::from_slice::<openapiv3::OpenAPI>(&api.body).expect("a valid OpenAPI 3 document");
    let api: serde_json::Value = serde_json::from_slice(&api.body).expect("OpenAPI is JSON");
    assert!(api["openapi"].as_str().is_some_and(|v| v.starts_with("3.")));
    for (path, method) in [
        ("/run", "post"),
        ("/", "post"),
        ("/healthz", "get"),
        ("/readyz", "get"),
        ("/metrics", "get"),
        ("/openapi.json", "get"),
    ] {
        assert!(
            api["paths"][path][method]["responses"].is_object(),
            "{path} {method}"
        );
    }
    for status in ["200", "400", "413", "429", "500", "503", "504"] {
        assert!(
            api["paths"]["/run"]["post"]["responses"][status].is_object(),
            "{status}"
        );
    }
}

/// The result line `warpvisor run --jobs` prints for one job with `stdin` on `backend`.
fn jobs_runner_line(backend: &str, stdin: &str) -> String {
    let jobs =
        PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("serve-jobs-{backend}.jsonl"));
    std::fs::write(&jobs, format!("{{\"stdin\": {stdin:?}}}\n")).expect("jobs written");
    let out = Command::new(env!("CARGO_BIN_EXE_warpvisor"))
        .arg("run")
        .arg(guest_file())
        .args(["--backend", backend, "--jobs"])
        .arg(&jobs)
        .output()
        .expect("warpvisor run");
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[test]
fn served_replies_equal_the_jobs_runner_on_cpu_and_wasmtime() {
    for backend in ["cpu", "wasmtime"] {
        let server = start_on(backend, &["--vms", "4"]);
        for stdin in ["hello", "# seven", "! trap", ""] {
            let served = server.request("POST", "/run", stdin.as_bytes(), true);
            assert_eq!(
                String::from_utf8_lossy(&served.body).trim(),
                jobs_runner_line(backend, stdin),
                "{backend}, stdin {stdin:?}"
            );
        }
    }
}

#[test]
fn limits_give_413_429_and_504_and_the_server_keeps_serving() {
    // One VM, one queued request; a looping guest holds the VM until the request timeout
    // (also the fleet's --timeout when none is given) stops it.
    let server = start(&[
        "--vms",
        "1",
        "--queue-depth",
        "1",
        "--max-request-bytes",
        "1000",
        "--request-timeout",
        "1",
        "--max-batch-delay",
        "0",
    ]);
    assert_eq!(server.post(&[b'a'; 2000]).status, 413);
    assert_eq!(server.post(&[b'a'; 900]).status, 200);
    let statuses: Vec<Reply> = std::thread::scope(|s| {
        let looping = s.spawn(|| server.post(b"~ loop"));
        std::thread::sleep(Duration::from_millis(300));
        let others: Vec<_> = (0..8)
            .map(|i| {
                let server = &server;
                s.spawn(move || server.post(format!("waiting {i}").as_bytes()))
            })
            .collect();
        let mut all = vec![looping.join().expect("looping request")];
        all.extend(others.into_iter().map(|h| h.join().expect("request")));
        all
    });
    // The looping request outlives its request timeout: 504, whether the reply's clock or the
    // fleet's (which stops the VM with `timeout`) runs out first.
    assert_eq!(statuses[0].status, 504, "{:?}", statuses[0]);
    let refused: Vec<&Reply> = statuses[1..].iter().filter(|r| r.status == 429).collect();
    assert!(refused.len() >= 6, "{statuses:?}");
    assert!(refused.iter().all(|r| r.header("retry-after") == Some("1")));
    let metrics = String::from_utf8(server.request("GET", "/metrics", b"", false).body)
        .expect("metrics are text");
    let refused_count = format!("warpvisor_requests_refused_total {}\n", refused.len());
    assert!(metrics.contains(&refused_count), "{metrics}");
    // Once the loop is stopped, the VM serves again.
    let mut later = server.post(b"later");
    for _ in 0..30 {
        if later.status == 200 {
            break;
        }
        std::thread::sleep(Duration::from_millis(500));
        later = server.post(b"later");
    }
    assert_eq!((later.status, later.body.as_slice()), (200, &b"later"[..]));
}

#[test]
fn a_module_that_cannot_load_is_an_error_before_listening() {
    let bad = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("serve-bad.wat");
    std::fs::write(&bad, "(module (func (export \"_start\") i32.add))").expect("written");
    let out = Command::new(env!("CARGO_BIN_EXE_warpvisor"))
        .args(["serve", "--backend", "cpu", "--listen", "127.0.0.1:0"])
        .arg(&bad)
        .output()
        .expect("warpvisor serve");
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("serve-bad.wat"), "{stderr}");
    assert!(!stderr.contains("listening"), "{stderr}");
}

#[cfg(unix)]
#[test]
fn sigterm_stops_the_server_cleanly() {
    let mut server = start(&["--vms", "2"]);
    assert_eq!(server.post(b"one").body, b"one");
    let pid = server.child.id() as libc::pid_t;
    // SAFETY: signalling our own child process.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    let status = server.child.wait().expect("server exits");
    assert!(status.success(), "{status:?}");
}

#[test]
fn logs_are_structured_events_selected_by_warpvisor_log() {
    let server = Server::start_with_env(
        &guest_file(),
        "wasmtime",
        &["--vms", "2", "--log-format", "json"],
        &[("WARPVISOR_LOG", "debug")],
    );
    assert_eq!(server.post(b"logged").status, 200);
    assert_eq!(server.post(b"! trap").status, 500);
    // Events are written after the reply; give the writer a moment.
    let mut events = Vec::new();
    for _ in 0..100 {
        events = server
            .log()
            .iter()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .collect();
        if events
            .iter()
            .filter(|e| {
                e["fields"]["message"] == "request" || e["fields"]["message"] == "request failed"
            })
            .count()
            >= 2
        {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let find = |message: &str| {
        events
            .iter()
            .find(|e| e["fields"]["message"] == message)
            .unwrap_or_else(|| panic!("no {message:?} event in {events:?}"))
    };
    assert_eq!(find("request")["fields"]["status"], 200);
    assert_eq!(find("request")["level"], "DEBUG");
    let failed = find("request failed");
    assert_eq!(failed["level"], "WARN");
    assert_eq!(failed["fields"]["status"], 500);
    assert_eq!(failed["fields"]["trap"], "unreachable");
    assert_eq!(find("batch")["target"], "warpvisor::serve::batcher");
}

#[test]
fn a_vm_that_finished_takes_the_next_request_while_a_long_one_runs() {
    // Two VMs: one holds a request that loops until its timeout; the other serves every
    // request that comes meanwhile, each as soon as the one before it ended.
    for (backend, mode) in [
        ("cpu", &["--calls", "continuations"][..]),
        ("opencl", &[][..]),
    ] {
        let mut flags = vec!["--vms", "2", "--request-timeout", "6"];
        flags.extend(mode);
        let server = start_on(backend, &flags);
        let (long, shorts) = std::thread::scope(|s| {
            let long = s.spawn(|| {
                let r = server.post(b"~ loop");
                (r, std::time::Instant::now())
            });
            std::thread::sleep(Duration::from_millis(300));
            let shorts: Vec<(Reply, std::time::Instant)> = (0..10)
                .map(|i| {
                    let r = server.post(format!("short {i}").as_bytes());
                    (r, std::time::Instant::now())
                })
                .collect();
            (long.join().expect("long request"), shorts)
        });
        assert_eq!(long.0.status, 504, "{backend}: {:?}", long.0);
        for (i, (r, done)) in shorts.iter().enumerate() {
            assert_eq!(
                (r.status, r.body.clone()),
                (200, format!("short {i}").into_bytes()),
                "{backend}"
            );
            // In whole batches the first short request would wait for the long one's timeout.
            assert!(
                *done + Duration::from_secs(2) < long.1,
                "{backend}: short {i} waited for the long request"
            );
        }
    }
}
