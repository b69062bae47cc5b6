//! `warpvisor serve` with resident handlers over real HTTP on loopback: VMs that keep their
//! state from request to request, and faults — a trap, an endless loop, an oversized
//! response, an exit, a request left unanswered — that cost only their own request while the
//! others are answered and the VM is re-instantiated.

mod http;

use std::path::PathBuf;

use http::{Reply, Server};

/// A resident handler on the guest API. Each request's first byte picks what it does:
/// `!` traps, `~` loops without end, `y` loops making system calls, `B` sends a 100 MiB
/// response, `x` exits 3, `n` takes the next request without answering; hostile calls of the
/// guest API: `<` reads into memory it does not have, `>` asks to read 2 GiB, `[` sends from
/// outside its memory, `]` sends a 2 GiB response, `%` sends status 42 and then answers 200 with
/// the negated return code as one byte; anything else is answered 200 with one byte counting
/// the requests this VM has taken, then the body.
const HANDLER: &str = r#"
(module
  (import "warpvisor" "request_next" (func $next (result i32)))
  (import "warpvisor" "request_read" (func $read (param i32 i32) (result i32)))
  (import "warpvisor" "response_send" (func $send (param i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "proc_exit" (func $exit (param i32)))
  (import "wasi_snapshot_preview1" "sched_yield" (func $yield (result i32)))
  (memory (export "memory") 2 2000)
  (global $taken (mut i32) (i32.const 0))
  (func (export "_start")
    (local $len i32) (local $first i32) (local $rc i32)
    (loop $serve
      (local.set $len (call $next))
      (if (i32.lt_s (local.get $len) (i32.const 0)) (then (return)))
      (local.set $len (call $read (i32.const 1024) (i32.const 60000)))
      (global.set $taken (i32.add (global.get $taken) (i32.const 1)))
      (local.set $first (i32.load8_u (i32.const 1024)))
      (if (i32.eq (local.get $first) (i32.const 33)) (then unreachable))
      (if (i32.eq (local.get $first) (i32.const 126)) (then (loop $forever (br $forever))))
      (if (i32.eq (local.get $first) (i32.const 121))
        (then (loop $yielding (drop (call $yield)) (br $yielding))))
      (if (i32.eq (local.get $first) (i32.const 120)) (then (call $exit (i32.const 3))))
      (if (i32.eq (local.get $first) (i32.const 110)) (then (br $serve)))
      (if (i32.eq (local.get $first) (i32.const 66))
        (then
          (drop (memory.grow (i32.const 1700)))
          (drop (call $send (i32.const 200) (i32.const 0) (i32.const 104857600)))
          (br $serve)))
      (if (i32.eq (local.get $first) (i32.const 60))
        (then (drop (call $read (i32.const 0xFFFFFFF0) (i32.const 100)))))
      (if (i32.eq (local.get $first) (i32.const 62))
        (then (drop (call $read (i32.const 1024) (i32.const 0x7FFFFFFF)))))
      (if (i32.eq (local.get $first) (i32.const 91))
        (then (drop (call $send (i32.const 200) (i32.const 0xFFFFFF00) (i32.const 0x1000)))))
      (if (i32.eq (local.get $first) (i32.const 93))
        (then
          (drop (call $send (i32.const 200) (i32.const 0) (i32.const 0x7FFFFFFF)))
          (br $serve)))
      (if (i32.eq (local.get $first) (i32.const 37))
        (then
          (local.set $rc (call $send (i32.const 42) (i32.const 1024) (i32.const 1)))
          (i32.store8 (i32.const 1023) (i32.sub (i32.const 0) (local.get $rc)))
          (drop (call $send (i32.const 200) (i32.const 1023) (i32.const 1)))
          (br $serve)))
      (i32.store8 (i32.const 1023) (global.get $taken))
      (drop (call $send (i32.const 200) (i32.const 1023) (i32.add (local.get $len) (i32.const 1))))
      (br $serve))))
"#;

fn handler_file() -> PathBuf {
    let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("resident-handler.wat");
    std::fs::write(&path, HANDLER).expect("handler written");
    path
}

/// Posts every body at once, one connection each; the replies in order.
fn post_all(server: &Server, bodies: &[Vec<u8>]) -> Vec<Reply> {
    std::thread::scope(|s| {
        let handles: Vec<_> = bodies
            .iter()
            .map(|b| s.spawn(move || server.post(b)))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("client"))
            .collect()
    })
}

#[test]
fn resident_handlers_keep_their_state_and_answer_every_request() {
    for backend in ["cpu", "wasmtime"] {
        let server = Server::start_module(
            &handler_file(),
            backend,
            &["--vms", "4", "--queue-depth", "100"],
        );
        let bodies: Vec<Vec<u8>> = (0..48)
            .map(|i| format!("request {i}").into_bytes())
            .collect();
        let replies = post_all(&server, &bodies);
        let mut most = 0;
        for (body, reply) in bodies.iter().zip(&replies) {
            assert_eq!(reply.status, 200, "{backend}: {reply:?}");
            assert_eq!(
                &reply.body[1..],
                &body[..],
                "{backend}: each reply is its own"
            );
            most = most.max(reply.body[0]);
        }
        // 48 requests on 4 VMs: a VM that counted past 12 kept its state between requests.
        assert!(most >= 12, "{backend}: no VM kept its count ({most})");
        // Later requests go on counting where the VMs left off: of five one after another,
        // two land on the same VM, whose count has then grown past 1.
        let again: Vec<Reply> = (0..5).map(|_| server.post(b"again")).collect();
        assert!(
            again.iter().all(|r| r.status == 200),
            "{backend}: {again:?}"
        );
        assert!(again.iter().any(|r| r.body[0] > 1), "{backend}: {again:?}");
        // The fleet's device time is reported; a wasmtime pool has none.
        let (executed, text) = server.metric("warpvisor_device_seconds_total{phase=\"execute\"}");
        assert_eq!(executed > 0.0, backend == "cpu", "{backend}: {text}");
    }
}

#[test]
fn a_fault_costs_only_its_own_request_and_the_vm_is_restarted() {
    // An endless loop is stopped by fuel where there is fuel, else by the request timeout
    // (504), as is one that keeps making system calls.
    for (backend, fuel, loop_status, loop_says) in [
        ("cpu", true, 500, "trapped: out_of_fuel"),
        ("wasmtime", false, 504, "trapped: timeout"),
    ] {
        let mut flags = vec![
            "--vms",
            "4",
            "--queue-depth",
            "100",
            "--request-timeout",
            "3",
        ];
        // Room for the 100 MiB response.
        flags.extend(["--max-memory", "2000"]);
        if fuel {
            flags.extend(["--fuel", "20000000"]);
        }
        let server = Server::start_module(&handler_file(), backend, &flags);
        let faults: [(&[u8], u16, &str); 11] = [
            (b"!", 500, "trapped: unreachable"),
            (b"~", loop_status, loop_says),
            (b"y", 504, "trapped: timeout"),
            (b"B", 500, "larger than the limit"),
            (b"x", 500, "exited with code 3"),
            (b"n", 500, "without answering"),
            (b"<", 500, "trapped: host_error"),
            (b">", 500, "trapped: host_error"),
            (b"[", 500, "trapped: host_error"),
            (b"]", 500, "larger than the limit"),
            (b"%", 200, "\u{2}"),
        ];
        let mut bodies: Vec<Vec<u8>> = faults.iter().map(|(b, _, _)| b.to_vec()).collect();
        bodies.extend((0..16).map(|i| format!("fine {i}").into_bytes()));
        let replies = post_all(&server, &bodies);
        for ((body, status, says), reply) in faults.iter().zip(&replies) {
            let text = String::from_utf8_lossy(&reply.body);
            assert_eq!(reply.status, *status, "{backend} {body:?}: {text}");
            assert!(text.contains(says), "{backend} {body:?}: {text}");
        }
        for (body, reply) in bodies[faults.len()..].iter().zip(&replies[faults.len()..]) {
            assert_eq!(reply.status, 200, "{backend}: {reply:?}");
            assert_eq!(&reply.body[1..], &body[..]);
        }
        // The VMs that failed were re-instantiated: every VM still answers.
        let after = post_all(&server, &vec![b"after".to_vec(); 12]);
        assert!(
            after.iter().all(|r| r.status == 200),
            "{backend}: {after:?}"
        );
        let (restarts, text) = server.metric("warpvisor_vm_restarts_total");
        // The trap, the two loops, the exit and the three bad pointers each ended a VM.
        assert!(restarts >= 7.0, "{backend}: {restarts} restarts\n{text}");
    }
}

#[test]
fn a_handler_that_never_takes_a_request_makes_the_server_refuse_clearly() {
    // `_start` returns at once: every VM ends without taking a request, three times.
    let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("resident-quitter.wat");
    std::fs::write(
        &path,
        r#"(module
             (import "warpvisor" "request_next" (func $next (result i32)))
             (memory (export "memory") 1)
             (func (export "_start")))"#,
    )
    .expect("written");
    let server = Server::start_module(&path, "cpu", &["--vms", "2"]);
    let reply = server.post(b"anyone?");
    let text = String::from_utf8_lossy(&reply.body);
    assert_eq!(reply.status, 503, "{text}");
    assert!(text.contains("without taking a request"), "{text}");
}

fn guest(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../guests/wasm")
        .join(name)
}

#[test]
fn the_sdk_examples_in_rust_and_c_keep_count() {
    for example in ["resident-echo.wasm", "resident-echo_c.wasm"] {
        let server = Server::start_module(&guest(example), "cpu", &["--vms", "1"]);
        let replies: Vec<Reply> = ["hello", "again"]
            .iter()
            .map(|b| server.post(b.as_bytes()))
            .collect();
        assert_eq!(replies[0].status, 200, "{example}: {:?}", replies[0]);
        assert_eq!(replies[0].body, b"1: HELLO", "{example}");
        assert_eq!(replies[1].body, b"2: AGAIN", "{example}");
        assert_eq!(server.post(b"").status, 400, "{example}: an empty body");
    }
}

#[test]
fn a_benchmark_ported_to_the_sdk_answers_as_the_wasi_program_does() {
    let request = br#"{"tweets": ["The GPU is FAST! #CUDA #rustlang", "I love it, too. #wasm", "no tags here"]}"#;
    // The WASI program through the jobs runner, on wasmtime: the oracle.
    let jobs = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("resident-strings-jobs.jsonl");
    let line = serde_json::json!({ "stdin": String::from_utf8_lossy(request) });
    std::fs::write(&jobs, format!("{line}\n")).expect("jobs written");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_warpvisor"))
        .arg("run")
        .arg(guest("bench-strings.wasm"))
        .args(["--backend", "wasmtime", "--jobs"])
        .arg(&jobs)
        .output()
        .expect("jobs runner runs");
    let result: serde_json::Value = serde_json::from_slice(&out.stdout).expect("a result line");
    let expected = result["stdout"]
        .as_str()
        .expect("stdout")
        .as_bytes()
        .to_vec();
    assert!(!expected.is_empty());
    for backend in ["cpu", "wasmtime"] {
        let server =
            Server::start_module(&guest("resident-strings.wasm"), backend, &["--vms", "2"]);
        let replies = post_all(&server, &vec![request.to_vec(); 6]);
        for r in replies {
            assert_eq!(r.status, 200, "{backend}: {r:?}");
            assert_eq!(r.body, expected, "{backend}");
        }
        let bad = server.post(b"not json");
        assert_eq!(bad.status, 400, "{backend}: a malformed request");
    }
}

/// `(continuations, fastcalls)` from the first line of `warpvisor compile MODULE EXTRA`.
fn kernel_functions(module: &std::path::Path, extra: &[&str]) -> (u32, u32) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_warpvisor"))
        .arg("compile")
        .arg(module)
        .args(extra)
        .output()
        .expect("warpvisor compile runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let head = text.lines().next().unwrap_or_default();
    // "/* warpvisor kernel: 128 of 129 functions (4 continuation, 124 fastcall), ..."
    let counts = head
        .split_once('(')
        .and_then(|(_, rest)| rest.split_once(')'))
        .map(|(inner, _)| inner.to_string())
        .unwrap_or_default();
    let numbers: Vec<u32> = counts
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|n| n.parse().ok())
        .collect();
    assert_eq!(numbers.len(), 2, "{head}");
    (numbers[0], numbers[1])
}

#[test]
fn on_cpu_only_the_way_to_request_next_is_a_continuation() {
    // `compile` shows the kernel `serve` builds: with direct calls (cpu's default) only the
    // functions that reach `request_next` are continuations; with continuations every
    // function that reaches any import is.
    let module = guest("resident-scrypt.wasm");
    let (direct, _) = kernel_functions(&module, &[]);
    let (continuations, _) = kernel_functions(&module, &["--calls", "continuations"]);
    assert!(
        (1..=8).contains(&direct),
        "{direct} continuations with direct calls"
    );
    assert!(
        continuations > 10 * direct,
        "{continuations} with continuations, {direct} with direct calls"
    );
    // A WASI program without the guest API has none with direct calls.
    let (wasi, _) = kernel_functions(&guest("bench-scrypt.wasm"), &[]);
    assert_eq!(wasi, 0);
}
