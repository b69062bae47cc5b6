//! `warpvisor simt`'s outputs for other tools and people: Accel-Sim traces read back by a
//! parser written from Accel-Sim's documented format, and the command line.

mod common;
mod simt_cases;

use simt_cases::{counts, replay, trace, IF_ELSE, NESTED, REGIONS};

/// One warp of an Accel-Sim trace, as its documented format reads.
#[derive(Debug, Default)]
struct ParsedWarp {
    lines: Vec<ParsedLine>,
}

#[derive(Debug)]
struct ParsedLine {
    mask: u32,
    opcode: String,
    addresses: usize,
}

/// Reads `kernel-N.traceg` the way Accel-Sim's trace parser does: `-key = value` header lines,
/// `#BEGIN_TB` / `thread block = x,y,z` / `warp = n` / `insts = n` / n instruction lines /
/// `#END_TB`; an instruction line is `PC mask dest_num [R..] opcode src_num [R..] mem_width`
/// and, when `mem_width > 0`, an address mode (0: one hex address per active lane).
fn parse_accel_sim(text: &str) -> (Vec<(String, String)>, Vec<ParsedWarp>) {
    let mut header = Vec::new();
    let mut warps = Vec::new();
    let mut lines = text.lines().peekable();
    while let Some(l) = lines.next() {
        let l = l.trim();
        if let Some(kv) = l.strip_prefix('-') {
            let (k, v) = kv.split_once(" = ").expect("header line: -key = value");
            header.push((k.to_string(), v.to_string()));
        } else if l == "#BEGIN_TB" {
            let mut tb_done = false;
            while !tb_done {
                let l = lines.next().expect("#END_TB").trim();
                if l.is_empty() || l.starts_with("thread block = ") {
                    continue;
                }
                if l == "#END_TB" {
                    tb_done = true;
                    continue;
                }
                assert!(l.starts_with("warp = "), "{l}");
                let n: usize = lines
                    .next()
                    .and_then(|x| x.trim().strip_prefix("insts = "))
                    .expect("insts = N")
                    .parse()
                    .unwrap();
                let mut warp = ParsedWarp::default();
                for _ in 0..n {
                    let line = lines.next().expect("an instruction line");
                    let mut t = line.split_whitespace();
                    u64::from_str_radix(t.next().unwrap(), 16).expect("PC in hex");
                    let mask = u32::from_str_radix(t.next().unwrap(), 16).expect("mask in hex");
                    let nd: usize = t.next().unwrap().parse().unwrap();
                    for _ in 0..nd {
                        assert!(t.next().unwrap().starts_with('R'));
                    }
                    let opcode = t.next().unwrap().to_string();
                    let ns: usize = t.next().unwrap().parse().unwrap();
                    for _ in 0..ns {
                        assert!(t.next().unwrap().starts_with('R'));
                    }
                    let width: u32 = t.next().unwrap().parse().unwrap();
                    let mut addresses = 0;
                    if width > 0 {
                        assert_eq!(t.next(), Some("0"), "list_all address mode");
                        for _ in 0..mask.count_ones() {
                            let a = t.next().expect("one address per active lane");
                            u64::from_str_radix(a.trim_start_matches("0x"), 16).unwrap();
                            addresses += 1;
                        }
                    }
                    assert_eq!(t.next(), None, "{line}");
                    warp.lines.push(ParsedLine {
                        mask,
                        opcode,
                        addresses,
                    });
                }
                warps.push(warp);
            }
        }
    }
    (header, warps)
}

#[test]
fn accel_sim_traces_parse_end_every_warp_in_exit_and_match_the_replay() {
    // 64 jobs (two warps) of the nested loops and of the WASI program with hypercalls.
    let ns: Vec<i32> = (0..64).map(|v| 1 + (v * 7) % 6).collect();
    let (t, _) = trace(NESTED, "f", &ns, 64);
    let (loads, _) = trace(REGIONS, "f", &[0; 40], 40);
    for (trace, warps) in [(t, 2), (loads, 2)] {
        let dir = tempdir("accel-sim");
        let s = warpvisor::simt::accel_sim::write(&trace, &dir, 8).unwrap();
        let list = std::fs::read_to_string(dir.join("kernelslist.g")).unwrap();
        assert_eq!(list.trim(), "kernel-1.traceg");
        let text = std::fs::read_to_string(dir.join("kernel-1.traceg")).unwrap();
        let (header, parsed) = parse_accel_sim(&text);
        assert!(header
            .iter()
            .any(|(k, v)| k == "grid dim" && v == &format!("({warps},1,1)")));
        assert!(header
            .iter()
            .any(|(k, v)| k == "accelsim tracer version" && v == "3"));
        assert_eq!(parsed.len(), warps);
        let replay = replay(&trace, &[32]);
        let (mut issued, mut executed) = (0u64, 0u64);
        for w in &parsed {
            let last = w.lines.last().unwrap();
            assert_eq!(last.opcode, "EXIT");
            assert_eq!(w.lines.iter().filter(|l| l.opcode == "EXIT").count(), 1);
            issued += w.lines.len() as u64 - 1;
            executed += w.lines[..w.lines.len() - 1]
                .iter()
                .map(|l| u64::from(l.mask.count_ones()))
                .sum::<u64>();
        }
        assert_eq!((issued, executed), counts(&replay[0]));
        assert_eq!(s.issued, issued);
        assert_eq!(s.executed, executed);
        // Memory lines carry one address per active lane; the shadow stack is local memory.
        let mem: Vec<&ParsedLine> = parsed
            .iter()
            .flat_map(|w| &w.lines)
            .filter(|l| l.addresses > 0)
            .collect();
        let sum: usize = mem.iter().map(|l| l.addresses).sum();
        let accesses: u64 = replay[0].memory.values().map(|m| m.accesses).sum();
        assert_eq!(sum as u64, accesses);
        if accesses > 0 {
            assert!(mem.iter().any(|l| l.opcode == "LDL"));
            assert!(mem.iter().any(|l| l.opcode == "LDG.E"));
        }
    }
}

fn tempdir(name: &str) -> std::path::PathBuf {
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("simt-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// Runs the `warpvisor` binary: (exit code, stdout, stderr).
fn cli(args: &[&str], dir: &std::path::Path) -> (i32, String, String) {
    let out = std::process::Command::new(common::warpvisor_bin())
        .current_dir(dir)
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn the_command_line_traces_analyses_writes_accel_sim_and_advises_a_run() {
    let dir = tempdir("cli");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("m.wat"), IF_ELSE).unwrap();
    let jobs: String = (0..32).map(|i| format!("{{\"args\": [{i}]}}\n")).collect();
    std::fs::write(dir.join("jobs.jsonl"), jobs).unwrap();
    let (code, _, err) = cli(
        &[
            "simt",
            "trace",
            "m.wat",
            "--invoke",
            "f",
            "--jobs",
            "jobs.jsonl",
            "-o",
            "t.trace",
        ],
        &dir,
    );
    assert_eq!(code, 0, "{err}");
    let (code, md, err) = cli(
        &[
            "simt", "analyze", "t.trace", "--json", "r.json", "--svg", "r.svg",
        ],
        &dir,
    );
    assert_eq!(code, 0, "{err}");
    // 16 odd, 16 even lanes: issued 4 + 3 + 5 + 2 = 14, executed 32*4 + 16*3 + 16*5 + 32*2.
    let eff = 100.0 * (32.0 * 4.0 + 48.0 + 80.0 + 64.0) / (14.0 * 32.0);
    assert!(md.contains(&format!("| 32 | {eff:.1}% |")), "{md}");
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("r.json")).unwrap()).unwrap();
    assert_eq!(json["widths"][2]["issued"], 14);
    assert!(std::fs::read_to_string(dir.join("r.svg"))
        .unwrap()
        .contains("</svg>"));
    let (code, _, err) = cli(&["simt", "accel-sim", "t.trace", "-o", "sim"], &dir);
    assert_eq!(code, 0, "{err}");
    let (_, warps) =
        parse_accel_sim(&std::fs::read_to_string(dir.join("sim/kernel-1.traceg")).unwrap());
    assert_eq!(warps.len(), 1);
    let (code, _, err) = cli(
        &[
            "run",
            "--analyze",
            "--backend",
            "cpu",
            "m.wat",
            "--invoke",
            "f",
            "--jobs",
            "jobs.jsonl",
            "--vms",
            "32",
        ],
        &dir,
    );
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains(&format!("SIMT efficiency {eff:.1}% at width 32")),
        "{err}"
    );
    // Bad input: clear errors, exit 1, no panic.
    std::fs::write(dir.join("junk.trace"), b"WVSIMT\0\0\x09\0\0\0").unwrap();
    for args in [
        &["simt", "analyze", "junk.trace"][..],
        &["simt", "analyze", "m.wat"],
        &["simt", "analyze", "missing.trace"],
        &["simt", "analyze", "t.trace", "--widths", "0"],
        &[
            "simt",
            "accel-sim",
            "t.trace",
            "-o",
            "x",
            "--interleave",
            "3",
        ],
        &[
            "simt", "trace", "m.wat", "--invoke", "nope", "-o", "u.trace",
        ],
    ] {
        let (code, _, err) = cli(args, &dir);
        assert!(code == 1 || code == 2, "{args:?}: {code} {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert!(!err.trim().is_empty(), "{args:?}");
    }
}

#[test]
fn damaged_trace_files_give_errors_never_panics() {
    let args: Vec<i32> = (0..8).collect();
    let (t, _) = trace(NESTED, "f", &args, 8);
    let mut file = Vec::new();
    t.write(&mut file).unwrap();
    // A fixed pseudo-random sequence of byte flips over the whole file (header and records).
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    // The jobs start after the magic, version, header length, header and job count; each is
    // a flag, a word count, a byte count and its records.
    let header_len = u64::from_le_bytes(file[12..20].try_into().unwrap()) as usize;
    let mut records = Vec::new();
    let mut at = 20 + header_len + 8;
    while at < file.len() {
        let size = u64::from_le_bytes(file[at + 9..at + 17].try_into().unwrap()) as usize;
        records.extend(at + 17..at + 17 + size);
        at += 17 + size;
    }
    assert!(records.len() > 50);
    let (mut read_ok, mut analysed) = (0, 0);
    for round in 0..300 {
        let mut damaged = file.clone();
        // Half the rounds any bit anywhere; half a varint's value bits in the records (the
        // file's word counts still hold, so the damage reaches the analysis).
        for _ in 0..1 + next() % 4 {
            if round % 2 == 0 {
                let at = (next() % damaged.len() as u64) as usize;
                damaged[at] ^= 1 << (next() % 8);
            } else {
                let at = records[(next() % records.len() as u64) as usize];
                damaged[at] ^= 1 << (next() % 7);
            }
        }
        let read = std::panic::catch_unwind(|| {
            warpvisor::simt::Trace::read(&mut damaged.as_slice(), damaged.len() as u64)
        })
        .expect("reading a damaged trace panicked");
        if let Ok(trace) = read {
            read_ok += 1;
            let result = std::panic::catch_unwind(|| {
                warpvisor::simt::analyze(&trace, &warpvisor::simt::AnalysisConfig::default())
            })
            .expect("analysing a damaged trace panicked");
            if result.is_ok() {
                analysed += 1;
            }
        }
    }
    // Most flips land in the records: read, then either analysed or refused.
    assert!(read_ok > 100, "{read_ok}");
    assert!(analysed < read_ok, "some damage must be caught");
}

/// `guests/wasm/dwarf-collatz.wasm`: `guests/c/debug/collatz.c` built with DWARF.
fn collatz_binary() -> Vec<u8> {
    std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../guests/wasm/dwarf-collatz.wasm"
    ))
    .unwrap()
}

/// The line of `guests/c/debug/collatz.c` whose text contains `marker`.
fn collatz_line(marker: &str) -> String {
    let src = include_str!("../../../guests/c/debug/collatz.c");
    let n = src
        .lines()
        .position(|l| l.contains(marker))
        .expect("marker in collatz.c");
    format!("collatz.c:{}", n + 1)
}

#[test]
fn the_report_names_the_source_lines_that_lose_the_most_from_dwarf() {
    use warpvisor::simt::tracer::traced_program;

    let binary = collatz_binary();
    let program = traced_program(&binary, common::cpu().as_ref(), 0).unwrap();
    // Start values whose Collatz walks differ in length: the lanes leave the loop apart.
    let start = |v: usize| vec![(v * 37 + 1).to_string()];
    let (results, collatz) = simt_cases::trace_wasi_jobs(&binary, program, 32, 256, start);
    assert!(results.iter().all(|r| r.exit_code == 0 && r.trap.is_none()));
    let source = collatz
        .header
        .source
        .as_ref()
        .expect("the module has DWARF");
    assert!(source.files.iter().any(|f| f.ends_with("collatz.c")));
    let config = warpvisor::simt::AnalysisConfig::default();
    let results = warpvisor::simt::analyze(&collatz, &config).unwrap();
    let report = warpvisor::simt::Report::new(&collatz, config.grouping, &results);
    // The loop body loses the most, then the loop's test and its counter; the costliest
    // divergent branch is the loop's exit test.
    let worst = report.worst_lines(3);
    assert!(
        worst[0]
            .location
            .ends_with(&collatz_line("the divergent body")),
        "{worst:?}"
    );
    assert!(
        worst.iter().all(|l| l.location.contains("collatz.c")),
        "{worst:?}"
    );
    assert!(worst[0].efficiency < 0.6, "{worst:?}");
    let branch = &report.branches[0];
    assert!(branch.idle_share > 0.9, "{branch:?}");
    assert_eq!(
        branch
            .source
            .as_deref()
            .map(|s| s.ends_with(&collatz_line("the divergent loop"))),
        Some(true),
        "{branch:?}"
    );
    let md = report.markdown();
    assert!(md.contains("## Source lines") && md.contains(&collatz_line("the divergent body")));
    // The trace file keeps the lines.
    let mut file = Vec::new();
    collatz.write(&mut file).unwrap();
    let back = warpvisor::simt::Trace::read(&mut file.as_slice(), file.len() as u64).unwrap();
    assert_eq!(back.header.source.as_ref(), Some(source));

    // Without DWARF there are no lines, and nothing else changes.
    let (plain, _) = trace(IF_ELSE, "f", &[1, 2], 2);
    assert!(plain.header.source.is_none());
    let r = warpvisor::simt::analyze(&plain, &config).unwrap();
    let report = warpvisor::simt::Report::new(&plain, config.grouping, &r);
    assert!(report.lines.is_empty() && !report.markdown().contains("## Source lines"));
}

#[test]
fn damaged_debug_sections_give_no_lines_never_a_panic() {
    let binary = collatz_binary();
    let module = warpvisor::frontend::load(&binary).unwrap();
    let table = warpvisor::simt::BlockTable::of(&module).unwrap();
    assert!(warpvisor::simt::source::SourceLines::of(&binary, &table).is_some());
    let at = binary
        .windows(11)
        .position(|w| w == b".debug_line")
        .expect("a .debug_line section")
        + 11;
    let mut x: u32 = 12345;
    for round in 0..200 {
        let mut damaged = binary.clone();
        for _ in 0..1 + round % 8 {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
            let k = at + (x as usize >> 8) % 400;
            damaged[k] ^= 1 << (x % 8);
        }
        let lines =
            std::panic::catch_unwind(|| warpvisor::simt::source::SourceLines::of(&damaged, &table))
                .expect("damaged DWARF panicked");
        if let Some(lines) = lines {
            assert_eq!(lines.blocks.len(), table.ids.len());
        }
    }
}
