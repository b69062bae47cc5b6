//! The spec-test script runner (`warpvisor wast`): runs `.wast` scripts through the whole
//! pipeline — front end, translator, backend, fleet — one VM per instance.

mod link;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use wast::core::{NanPattern, WastArgCore, WastRetCore};
use wast::parser::{self, ParseBuffer};
use wast::{QuoteWat, Wast, WastArg, WastDirective, WastExecute, WastInvoke, WastRet};

use crate::backend::Backend;
use crate::codegen::KernelOptions;
use crate::frontend;
use crate::vmm::{Fleet, FleetConfig, Outcome, Program, TrapKind, Value, VmmError};
use link::{InstanceRef, LinkError, Provider};

/// How scripts are run.
#[derive(Clone)]
pub struct WastConfig {
    /// The backend that runs the instances.
    pub backend: Arc<dyn Backend>,
    /// Kernel settings.
    pub kernel: KernelOptions,
    /// Fleet settings (one VM per instance is used).
    pub fleet: FleetConfig,
}

/// The result of one script.
#[derive(Debug, Default, Clone)]
pub struct ScriptReport {
    /// The script's name.
    pub name: String,
    /// Checks that passed.
    pub passed: usize,
    /// Checks that failed, with `line: reason`.
    pub failures: Vec<String>,
    /// Checks skipped, with `line: reason`.
    pub skips: Vec<String>,
}

/// The state of an instance slot: usable, or skipped with a reason.
#[derive(Clone)]
enum Slot {
    Ready(InstanceRef),
    Unavailable(String),
}

enum Check {
    Pass,
    Fail(String),
    Skip(String),
}

struct Script<'c> {
    config: &'c WastConfig,
    current: Option<Slot>,
    named: HashMap<String, Slot>,
    registered: HashMap<String, Provider>,
}

fn value_of(arg: &WastArg<'_>) -> Result<Value, String> {
    match arg {
        WastArg::Core(c) => Ok(match c {
            WastArgCore::I32(v) => Value::I32(*v),
            WastArgCore::I64(v) => Value::I64(*v),
            WastArgCore::F32(f) => Value::F32(f.bits),
            WastArgCore::F64(f) => Value::F64(f.bits),
            WastArgCore::RefNull(wast::core::HeapType::Abstract { ty, .. }) => match ty {
                wast::core::AbstractHeapType::Func => Value::FuncRef(None),
                _ => Value::ExternRef(None),
            },
            WastArgCore::RefExtern(n) => Value::ExternRef(Some(*n)),
            other => return Err(format!("unsupported argument {other:?}")),
        }),
        _ => Err("component-model argument".into()),
    }
}

fn f32_matches(p: &NanPattern<wast::token::F32>, bits: u32) -> bool {
    let nan = bits & 0x7f80_0000 == 0x7f80_0000 && bits & 0x007f_ffff != 0;
    match p {
        NanPattern::CanonicalNan => bits & 0x7fff_ffff == 0x7fc0_0000,
        NanPattern::ArithmeticNan => nan && bits & 0x0040_0000 != 0,
        NanPattern::Value(v) => v.bits == bits,
    }
}

fn f64_matches(p: &NanPattern<wast::token::F64>, bits: u64) -> bool {
    let exp = 0x7ff0_0000_0000_0000u64;
    let nan = bits & exp == exp && bits & 0x000f_ffff_ffff_ffff != 0;
    match p {
        NanPattern::CanonicalNan => bits & 0x7fff_ffff_ffff_ffff == 0x7ff8_0000_0000_0000,
        NanPattern::ArithmeticNan => nan && bits & 0x0008_0000_0000_0000 != 0,
        NanPattern::Value(v) => v.bits == bits,
    }
}

/// Whether `v` matches the expected result; `Err` when the pattern is not supported here.
fn ret_matches(expected: &WastRetCore<'_>, v: &Value) -> Result<bool, String> {
    use wast::core::{AbstractHeapType, HeapType};
    Ok(match (expected, v) {
        (WastRetCore::I32(e), Value::I32(a)) => e == a,
        (WastRetCore::I64(e), Value::I64(a)) => e == a,
        (WastRetCore::F32(p), Value::F32(b)) => f32_matches(p, *b),
        (WastRetCore::F64(p), Value::F64(b)) => f64_matches(p, *b),
        (WastRetCore::RefNull(ty), Value::FuncRef(None)) => match ty {
            None => true,
            Some(HeapType::Abstract { ty, .. }) => {
                matches!(ty, AbstractHeapType::Func | AbstractHeapType::NoFunc)
            }
            Some(_) => false,
        },
        (WastRetCore::RefNull(ty), Value::ExternRef(None)) => match ty {
            None => true,
            Some(HeapType::Abstract { ty, .. }) => {
                matches!(ty, AbstractHeapType::Extern | AbstractHeapType::NoExtern)
            }
            Some(_) => false,
        },
        (WastRetCore::RefExtern(e), Value::ExternRef(Some(a))) => e.is_none_or(|e| e == *a),
        (WastRetCore::RefFunc(_), Value::FuncRef(Some(_))) => true,
        (WastRetCore::Either(options), v) => {
            for o in options {
                if ret_matches(o, v)? {
                    return Ok(true);
                }
            }
            false
        }
        (WastRetCore::V128(_), _) => return Err("v128 results".into()),
        _ => false,
    })
}

/// Whether trap `kind` is what the spec message describes.
fn trap_matches(kind: TrapKind, message: &str) -> bool {
    let expected: &[TrapKind] = match message {
        m if m.starts_with("integer divide by zero") => &[TrapKind::IntegerDivisionByZero],
        m if m.starts_with("integer overflow") => &[TrapKind::IntegerOverflow],
        m if m.starts_with("invalid conversion to integer") => &[TrapKind::BadConversionToInteger],
        m if m.starts_with("out of bounds memory access") => &[TrapKind::MemoryOutOfBounds],
        m if m.starts_with("undefined element") || m.starts_with("out of bounds table access") => {
            &[TrapKind::TableOutOfBounds]
        }
        m if m.starts_with("uninitialized element") => &[TrapKind::IndirectCallToNull],
        m if m.starts_with("indirect call type mismatch") => &[TrapKind::BadSignature],
        m if m.starts_with("unreachable") => &[TrapKind::Unreachable],
        m if m.starts_with("call stack exhausted") || m.starts_with("stack overflow") => {
            &[TrapKind::StackOverflow]
        }
        _ => return false,
    };
    expected.contains(&kind)
}

impl<'c> Script<'c> {
    fn new(config: &'c WastConfig) -> Self {
        let mut registered = HashMap::new();
        registered.insert("spectest".to_string(), Provider::Spectest);
        Script {
            config,
            current: None,
            named: HashMap::new(),
            registered,
        }
    }

    /// Compiles, links and instantiates a module.
    fn instantiate(&self, module: &mut QuoteWat<'_>) -> Result<Result<Slot, VmmError>, String> {
        let binary = module
            .encode()
            .map_err(|e| format!("module does not encode: {e}"))?;
        let parsed = frontend::load(&binary).map_err(|e| e.to_string())?;
        let registered = &self.registered;
        let imports = match link::resolve(&parsed, &|m| registered.get(m).cloned()) {
            Ok(i) => i,
            Err(LinkError::Unsupported(why)) => return Ok(Ok(Slot::Unavailable(why))),
            Err(LinkError::Unlinkable(why)) => return Err(format!("link error: {why}")),
        };
        let program =
            match Program::compile(&binary, &self.config.kernel, self.config.backend.as_ref()) {
                Ok(p) => Arc::new(p),
                Err(e) => return Ok(Err(e)),
            };
        Ok(Fleet::new(program, self.config.fleet, imports)
            .map(|f| Slot::Ready(Arc::new(Mutex::new(f)))))
    }

    fn slot(&self, id: Option<wast::token::Id<'_>>) -> Option<Slot> {
        match id {
            Some(id) => self.named.get(id.name()).cloned(),
            None => self.current.clone(),
        }
    }

    fn invoke(&self, inv: &WastInvoke<'_>) -> Result<Outcome, Check> {
        let slot = self
            .slot(inv.module)
            .ok_or_else(|| Check::Fail("no module to invoke".into()))?;
        let inst = match slot {
            Slot::Ready(i) => i,
            Slot::Unavailable(why) => return Err(Check::Skip(why)),
        };
        let args: Vec<Value> = inv
            .args
            .iter()
            .map(value_of)
            .collect::<Result<_, _>>()
            .map_err(Check::Skip)?;
        let mut fleet = inst
            .try_lock()
            .map_err(|_| Check::Fail("instance busy".into()))?;
        let outcome = fleet
            .invoke(inv.name, &[args])
            .map_err(|e| Check::Fail(format!("invoke `{}`: {e}", inv.name)))?;
        outcome
            .into_iter()
            .next()
            .ok_or_else(|| Check::Fail("no outcome".into()))
    }

    fn execute(&mut self, exec: &mut WastExecute<'_>) -> Result<Outcome, Check> {
        match exec {
            WastExecute::Invoke(inv) => self.invoke(inv),
            WastExecute::Get { module, global, .. } => {
                let slot = self
                    .slot(*module)
                    .ok_or_else(|| Check::Fail("no module".into()))?;
                match slot {
                    Slot::Ready(i) => {
                        let mut fleet = i
                            .try_lock()
                            .map_err(|_| Check::Fail("instance busy".into()))?;
                        let v = fleet
                            .global(0, global)
                            .map_err(|e| Check::Fail(e.to_string()))?
                            .ok_or_else(|| Check::Fail(format!("no global `{global}`")))?;
                        Ok(Outcome::Returned(vec![v]))
                    }
                    Slot::Unavailable(why) => Err(Check::Skip(why)),
                }
            }
            WastExecute::Wat(wat) => {
                let mut q = QuoteWat::Wat(std::mem::replace(
                    wat,
                    wast::Wat::Module(wast::core::Module {
                        span: wast::token::Span::from_offset(0),
                        id: None,
                        name: None,
                        kind: wast::core::ModuleKind::Binary(Vec::new()),
                    }),
                ));
                match self.instantiate(&mut q).map_err(Check::Fail)? {
                    Ok(Slot::Ready(_)) => Ok(Outcome::Returned(Vec::new())),
                    Ok(Slot::Unavailable(why)) => Err(Check::Skip(why)),
                    Err(VmmError::InstantiationTrap(kind)) => Ok(Outcome::Trapped(kind)),
                    Err(e) => Err(Check::Fail(e.to_string())),
                }
            }
        }
    }

    fn directive(&mut self, d: WastDirective<'_>) -> Option<Check> {
        Some(match d {
            WastDirective::Module(mut m) => {
                let id = match &m {
                    QuoteWat::Wat(wast::Wat::Module(m)) => m.id.map(|i| i.name().to_string()),
                    _ => None,
                };
                let (slot, check) = match self.instantiate(&mut m) {
                    Ok(Ok(slot)) => {
                        let check = match &slot {
                            Slot::Unavailable(why) => Check::Skip(why.clone()),
                            Slot::Ready(_) => Check::Pass,
                        };
                        (slot, check)
                    }
                    Ok(Err(e)) => (
                        Slot::Unavailable(format!("module failed: {e}")),
                        Check::Fail(e.to_string()),
                    ),
                    Err(e) => (
                        Slot::Unavailable(format!("module failed: {e}")),
                        Check::Fail(e),
                    ),
                };
                if let Some(id) = id {
                    self.named.insert(id, slot.clone());
                }
                self.current = Some(slot);
                check
            }
            WastDirective::Register { name, module, .. } => {
                match self.slot(module) {
                    Some(Slot::Ready(i)) => {
                        self.registered
                            .insert(name.to_string(), Provider::Instance(i));
                    }
                    Some(Slot::Unavailable(why)) => {
                        self.registered
                            .insert(name.to_string(), Provider::Unavailable(why));
                    }
                    None => {
                        self.registered.remove(name);
                    }
                }
                return None;
            }
            WastDirective::Invoke(inv) => match self.invoke(&inv) {
                Ok(_) => Check::Pass,
                Err(c) => c,
            },
            WastDirective::AssertReturn {
                mut exec, results, ..
            } => match self.execute(&mut exec) {
                Err(c) => c,
                Ok(Outcome::Trapped(k)) => {
                    Check::Fail(format!("trapped with {k}, expected a return"))
                }
                Ok(Outcome::Exited(c)) => {
                    Check::Fail(format!("exited with {c}, expected a return"))
                }
                Ok(Outcome::Returned(values)) => {
                    if values.len() != results.len() {
                        Check::Fail(format!(
                            "returned {values:?}, expected {} values",
                            results.len()
                        ))
                    } else {
                        let mut check = Check::Pass;
                        for (e, v) in results.iter().zip(&values) {
                            let WastRet::Core(e) = e else {
                                check = Check::Skip("component-model result".into());
                                break;
                            };
                            match ret_matches(e, v) {
                                Ok(true) => {}
                                Ok(false) => {
                                    check = Check::Fail(format!(
                                        "returned {values:?}, expected {results:?}"
                                    ));
                                    break;
                                }
                                Err(why) => {
                                    check = Check::Skip(why);
                                    break;
                                }
                            }
                        }
                        check
                    }
                }
            },
            WastDirective::AssertTrap {
                mut exec, message, ..
            } => match self.execute(&mut exec) {
                Err(c) => c,
                Ok(Outcome::Trapped(k)) if trap_matches(k, message) => Check::Pass,
                Ok(Outcome::Trapped(k)) => {
                    Check::Fail(format!("trapped with {k}, expected \"{message}\""))
                }
                Ok(o) => Check::Fail(format!("{o:?}, expected trap \"{message}\"")),
            },
            WastDirective::AssertExhaustion { call, message, .. } => match self.invoke(&call) {
                Err(c) => c,
                Ok(Outcome::Trapped(TrapKind::StackOverflow)) => Check::Pass,
                Ok(o) => Check::Fail(format!("{o:?}, expected \"{message}\"")),
            },
            WastDirective::AssertInvalid {
                mut module,
                message,
                ..
            }
            | WastDirective::AssertMalformed {
                mut module,
                message,
                ..
            } => match module.encode() {
                Err(_) => Check::Pass,
                Ok(bytes) => match frontend::load(&bytes) {
                    Err(_) => Check::Pass,
                    Ok(_) => Check::Fail(format!("module accepted, expected \"{message}\"")),
                },
            },
            WastDirective::AssertUnlinkable {
                module, message, ..
            } => {
                let mut q = QuoteWat::Wat(module);
                match self.instantiate(&mut q) {
                    Err(e) if e.starts_with("link error") => Check::Pass,
                    Err(e) => Check::Fail(e),
                    Ok(Ok(Slot::Unavailable(why))) => Check::Skip(why),
                    Ok(_) => Check::Fail(format!("module linked, expected \"{message}\"")),
                }
            }
            WastDirective::AssertInvalidCustom { .. }
            | WastDirective::AssertMalformedCustom { .. } => {
                Check::Skip("custom-section validation".into())
            }
            WastDirective::ModuleDefinition(_) | WastDirective::ModuleInstance { .. } => {
                Check::Skip("module definitions and instances".into())
            }
            WastDirective::AssertException { .. } | WastDirective::AssertSuspension { .. } => {
                Check::Skip("exceptions and stack switching are not supported".into())
            }
            WastDirective::Thread(_) | WastDirective::Wait { .. } => {
                Check::Skip("threads are not supported".into())
            }
        })
    }
}

/// Runs the script `text` (named `name` in the report).
pub fn run_script(name: &str, text: &str, config: &WastConfig) -> ScriptReport {
    let mut report = ScriptReport {
        name: name.to_string(),
        ..Default::default()
    };
    // The spec's names.wast uses bidirectional-override characters on purpose.
    let mut lexer = wast::lexer::Lexer::new(text);
    lexer.allow_confusing_unicode(true);
    let buf = match ParseBuffer::new_with_lexer(lexer) {
        Ok(b) => b,
        Err(e) => {
            report.failures.push(format!("0: script does not lex: {e}"));
            return report;
        }
    };
    let wast = match parser::parse::<Wast<'_>>(&buf) {
        Ok(w) => w,
        Err(e) => {
            report
                .failures
                .push(format!("0: script does not parse: {}", e.message()));
            return report;
        }
    };
    let mut script = Script::new(config);
    for d in wast.directives {
        let (line, _) = d.span().linecol_in(text);
        match script.directive(d) {
            None => {}
            Some(Check::Pass) => report.passed += 1,
            Some(Check::Fail(why)) => report.failures.push(format!("{}: {why}", line + 1)),
            Some(Check::Skip(why)) => report.skips.push(format!("{}: {why}", line + 1)),
        }
    }
    report
}
