//! A signalling NaN that meets a constant identity operand (`x * 1.0`, `min(x, -0.0)`, ...)
//! must still come out quiet, as WebAssembly's arithmetic NaNs are: device compilers fold such
//! operations to `x` itself, so the kernels quiet what those folds would let through. The
//! operands here are constants in the code, where the folds happen (the spec scripts pass them
//! as arguments, where they cannot), and constants the device compiler can only find by
//! propagating them: through locals, memory, conversions, calls and width round trips.

mod common;

use warpvisor::vmm::{FleetConfig, Outcome, Value};

/// Every f32/f64 operator that a device compiler may fold to one of its operands, with the
/// identity operand as a constant.
const OPS: &[(&str, &str, &str)] = &[
    ("mul", "1.0", "mul"),
    ("div", "1.0", "div"),
    ("sub", "0.0", "sub"),
    ("add", "-0.0", "add"),
    ("min_neg_zero", "-0.0", "min"),
    ("min_zero", "0.0", "min"),
    ("max_neg_zero", "-0.0", "max"),
    ("max_zero", "0.0", "max"),
    ("min_inf", "inf", "min"),
    ("max_neg_inf", "-inf", "max"),
];

/// Identities whose constant the device compiler finds only by constant propagation: `{T}` is
/// the float type, `{I}` the integer type of its width, `{X}` the signalling NaN operand and
/// `{ONE}` the bits of 1.0 as an integer. Each body may use a local `{T}` (index 1, never set
/// unless the body sets it) and the module's memory.
const PROPAGATED: &[(&str, &str)] = &[
    (
        "mul_by_local_one",
        "(local.set 1 ({T}.const 1.0)) ({T}.mul {X} (local.get 1))",
    ),
    ("sub_zero_initialised_local", "({T}.sub {X} (local.get 1))"),
    (
        "mul_by_one_stored_as_integer",
        "({I}.store (i32.const 0) ({I}.const {ONE})) ({T}.mul {X} ({T}.load (i32.const 0)))",
    ),
    (
        "div_by_converted_one",
        "({T}.div {X} ({T}.convert_i32_s (i32.const 1)))",
    ),
    ("mul_by_called_one", "({T}.mul {X} (call $one_{T}))"),
    ("width_round_trip", "{ROUND_TRIP}"),
];

fn module() -> String {
    let mut funcs = String::new();
    for (name, body) in PROPAGATED {
        for (t, i, one, round_trip) in [
            (
                "f32",
                "i32",
                "0x3f800000",
                "(f32.demote_f64 (f64.promote_f32 {X}))",
            ),
            (
                "f64",
                "i64",
                "0x3ff0000000000000",
                "(f64.promote_f32 (f32.demote_f64 {X}))",
            ),
        ] {
            let body = body
                .replace("{ROUND_TRIP}", round_trip)
                .replace("{X}", &format!("({t}.reinterpret_{i} (local.get 0))"))
                .replace("{T}", t)
                .replace("{I}", i)
                .replace("{ONE}", one);
            funcs.push_str(&format!(
                "(func (export \"{t}_{name}\") (param {i}) (result {i}) (local {t})
                   ({i}.reinterpret_{t} (block (result {t}) {body})))\n"
            ));
        }
    }
    for (name, constant, op) in OPS {
        funcs.push_str(&format!(
            "(func (export \"f32_{name}\") (param i32) (result i32)
               (i32.reinterpret_f32 (f32.{op} (f32.reinterpret_i32 (local.get 0)) (f32.const {constant}))))
             (func (export \"f64_{name}\") (param i64) (result i64)
               (i64.reinterpret_f64 (f64.{op} (f64.reinterpret_i64 (local.get 0)) (f64.const {constant}))))\n"
        ));
    }
    format!(
        "(module (memory 1)
           (func $one_f32 (result f32) (f32.const 1.0))
           (func $one_f64 (result f64) (f64.const 1.0))
           {funcs})"
    )
}

fn check(backend: &str) {
    let config = FleetConfig {
        num_vms: 4,
        ..FleetConfig::default()
    };
    let mut fleet = common::fleet(backend, &module(), 0, config);
    // Per width: the bits a quiet NaN has set, and signalling NaNs of both signs with payloads.
    let widths: [(&str, u64, [u64; 3]); 2] = [
        ("f32", 0x7fc0_0000, [0x7fa0_0000, 0xffa0_0001, 0x7f80_0001]),
        (
            "f64",
            0x7ff8_0000_0000_0000,
            [
                0x7ff4_0000_0000_0000,
                0xfff4_0000_0000_0001,
                0x7ff0_0000_0000_0001,
            ],
        ),
    ];
    let cases = OPS
        .iter()
        .map(|(name, constant, _)| (*name, *constant))
        .chain(
            PROPAGATED
                .iter()
                .map(|(name, _)| (*name, "a propagated constant")),
        );
    for (name, constant) in cases {
        for (width, quiet, inputs) in &widths {
            let func = format!("{width}_{name}");
            let jobs: Vec<Vec<Value>> = inputs
                .iter()
                .map(|&x| match *width {
                    "f32" => vec![Value::I32(x as u32 as i32)],
                    _ => vec![Value::I64(x as i64)],
                })
                .collect();
            for (x, o) in inputs.iter().zip(fleet.invoke(&func, &jobs).unwrap()) {
                let bits = match &o {
                    Outcome::Returned(r) => match r[..] {
                        [Value::I32(b)] => b as u32 as u64,
                        [Value::I64(b)] => b as u64,
                        _ => panic!("{backend} {func}: {r:?}"),
                    },
                    _ => panic!("{backend} {func}: {o:?}"),
                };
                assert!(
                    bits & quiet == *quiet,
                    "{backend}: {func} of signalling NaN {x:#x} and {constant} gave {bits:#x}, not a quiet NaN"
                );
            }
        }
    }
}

#[test]
fn folded_identities_quiet_signalling_nans_on_cpu() {
    check("cpu");
}

#[test]
fn folded_identities_quiet_signalling_nans_on_opencl() {
    check("opencl");
}

#[test]
fn folded_identities_quiet_signalling_nans_on_cuda_through_the_cpu_driver() {
    if !common::cuda_on_cpu_here() {
        return;
    }
    check("cuda");
}
