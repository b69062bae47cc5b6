//! The kernel cache (compiled kernels and generated sources): reused for the same settings,
//! never for others.

use std::sync::Arc;

use warpvisor::backend::cpu::CpuBackend;
use warpvisor::codegen::KernelOptions;
use warpvisor::vmm::{Fleet, FleetConfig, Imports, Outcome, Program, Value};

const WAT: &str = r#"(module (memory 1) (func (export "f") (param i32) (result i32)
    (i32.store (i32.const 5) (local.get 0)) (i32.load (i32.const 5))))"#;

fn objects(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "so"))
        .collect();
    v.sort();
    v
}

#[test]
fn cache_is_keyed_by_settings_and_checked_on_reuse() {
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("kernel-cache-test");
    let _ = std::fs::remove_dir_all(&dir);
    // This test binary has a single test, so setting the variable affects nothing else.
    std::env::set_var("WARPVISOR_CACHE_DIR", &dir);
    let backend = CpuBackend::new(Some(1)).unwrap();
    let run = |interleave: u32| {
        let options = KernelOptions {
            interleave,
            ..KernelOptions::default()
        };
        let p = Arc::new(Program::compile(WAT.as_bytes(), &options, &backend).unwrap());
        let config = FleetConfig {
            num_vms: 3,
            ..FleetConfig::default()
        };
        let mut f = Fleet::new(p, config, Imports::default()).unwrap();
        let o = f
            .invoke(
                "f",
                &[
                    vec![Value::I32(7)],
                    vec![Value::I32(8)],
                    vec![Value::I32(9)],
                ],
            )
            .unwrap();
        assert_eq!(o[2], Outcome::Returned(vec![Value::I32(9)]));
    };
    run(0);
    let first = objects(&dir);
    assert_eq!(first.len(), 1);
    let built = std::fs::metadata(&first[0]).unwrap().modified().unwrap();
    run(0);
    assert_eq!(objects(&dir), first, "same settings: reused");
    assert_eq!(
        std::fs::metadata(&first[0]).unwrap().modified().unwrap(),
        built,
        "not rebuilt"
    );
    run(4);
    run(8);
    assert_eq!(objects(&dir).len(), 3, "each interleave has its own kernel");
    // A manifest that does not match the settings makes the entry stale: it is rebuilt.
    let manifest = first[0].with_extension("json");
    std::fs::write(&manifest, "{\"options\": \"something else\"}").unwrap();
    std::thread::sleep(std::time::Duration::from_millis(20));
    run(0);
    assert_ne!(
        std::fs::metadata(&first[0]).unwrap().modified().unwrap(),
        built,
        "stale entry rebuilt"
    );
    // Generated sources are cached too, one per module and settings; an entry that does not
    // parse is generated again (and the kernel still runs right).
    let sources: Vec<_> = std::fs::read_dir(dir.join("source"))
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    assert_eq!(sources.len(), 3, "one source per interleave: {sources:?}");
    for s in &sources {
        std::fs::write(s, "{\"partitions\": 7}").unwrap();
    }
    run(4);
    let regenerated = sources
        .iter()
        .filter(|s| std::fs::read(s).unwrap().len() > 100)
        .count();
    assert_eq!(
        regenerated, 1,
        "the damaged entry of interleave 4 was written again"
    );
}
