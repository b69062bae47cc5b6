//! Call profiles: how often each call site of a module ran in a profiling run and, for a
//! `call_indirect`, which functions it reached. `warpvisor profile` records one by running
//! jobs on a counting kernel ([`KernelOptions::count_calls`](crate::codegen::KernelOptions),
//! `cpu` with direct calls; [`record`]); `--profile FILE` on `run` and `compile` hands it to
//! the translator, which turns each `call_indirect`'s hot targets into guarded direct calls
//! (`codegen/devirt.rs`) and weighs the partition planner's call edges by what ran
//! (`codegen/partition.rs`). The profile is part of the kernel options, so of every cache key.

pub mod record;

use std::collections::HashMap;
use std::path::Path;

use wasmparser::Operator;

use crate::frontend::Module;

/// The `format` field of a profile file.
pub const FORMAT: &str = "warpvisor-call-profile/1";
/// Distinct targets a counting kernel tells apart per `call_indirect` site; calls to any
/// further target count as `other`.
pub const TARGET_WAYS: usize = 4;
/// Counter words per call site in a counting kernel (`WV_PROFILE_WORDS`): the calls, a
/// (target + 1, calls) pair per way, then the calls to other targets.
pub const WORDS_PER_SITE: usize = 2 + 2 * TARGET_WAYS;
/// Largest profile file read.
pub const MAX_PROFILE_BYTES: u64 = 64 << 20;

/// A module's call profile.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct CallProfile {
    /// [`FORMAT`].
    pub format: String,
    /// SHA-256 of the module's binary: a profile applies to that module only.
    pub module: String,
    /// Jobs the profiling run ran.
    pub jobs: u64,
    /// The sites that ran at least once, in function and site order.
    pub sites: Vec<SiteCount>,
}

/// What one call site did.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct SiteCount {
    /// The calling function's index.
    pub func: u32,
    /// The site: the `call` and `call_indirect` operators of the function, numbered from 0 in
    /// order.
    pub site: u32,
    /// Times it ran.
    pub calls: u64,
    /// A `call_indirect`'s targets and how often each was called, most first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub targets: Vec<TargetCount>,
    /// A `call_indirect`'s calls to targets beyond the ones counted apart.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub other: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// One target of a `call_indirect` site.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct TargetCount {
    /// The function called.
    pub func: u32,
    /// Times.
    pub calls: u64,
}

/// Why a profile cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    /// The file could not be read.
    #[error("cannot read the profile {path}: {reason}")]
    Read {
        /// The file.
        path: String,
        /// What went wrong.
        reason: String,
    },
    /// Not a profile of this format.
    #[error("{path} is not a warpvisor call profile ({FORMAT}): {reason}")]
    Format {
        /// The file.
        path: String,
        /// What is wrong with it.
        reason: String,
    },
    /// Recorded for another module.
    #[error("the profile was recorded for another module (module SHA-256 {found}; this one is {expected}): record it again with `warpvisor profile`")]
    OtherModule {
        /// The profile's module hash.
        found: String,
        /// This module's.
        expected: String,
    },
    /// A site or target the module does not have.
    #[error("the profile does not fit the module: {0}")]
    Mismatch(String),
}

/// The call sites of a module: for each function, the operator indices of its `call` and
/// `call_indirect` operators, numbered in one sequence over the module (a counting kernel's
/// counter index is the site's number in that sequence).
#[derive(Debug, Clone, Default)]
pub struct CallSites {
    /// Number of the first site of each function (imports: the next function's).
    first: Vec<u32>,
    /// Operator indices of each function's sites, ascending.
    ops: Vec<Vec<u32>>,
}

impl CallSites {
    /// The sites of `module`.
    pub fn of(module: &Module<'_>) -> Self {
        let mut first = Vec::with_capacity(module.funcs.len());
        let mut ops = Vec::with_capacity(module.funcs.len());
        let mut next = 0u32;
        for f in 0..module.funcs.len() as u32 {
            first.push(next);
            let sites: Vec<u32> = module.body(f).map_or_else(Vec::new, |b| {
                b.ops
                    .iter()
                    .enumerate()
                    .filter(|(_, op)| is_call(op))
                    .map(|(i, _)| i as u32)
                    .collect()
            });
            next = next.saturating_add(sites.len() as u32);
            ops.push(sites);
        }
        CallSites { first, ops }
    }

    /// Sites in the module.
    pub fn total(&self) -> u32 {
        self.first.last().copied().unwrap_or(0) + self.ops.last().map_or(0, |s| s.len() as u32)
    }

    /// Sites of function `func`.
    pub fn count(&self, func: u32) -> u32 {
        self.ops.get(func as usize).map_or(0, |s| s.len() as u32)
    }

    /// The site number within `func` of its operator `op_index`, if that is a call.
    pub fn site_at(&self, func: u32, op_index: usize) -> Option<u32> {
        let ops = self.ops.get(func as usize)?;
        ops.binary_search(&(op_index as u32)).ok().map(|s| s as u32)
    }

    /// The module-wide number of site `site` of `func`.
    pub fn id(&self, func: u32, site: u32) -> u32 {
        self.first.get(func as usize).copied().unwrap_or(0) + site
    }

    /// The operator index of site `site` of `func`.
    fn op_of(&self, func: u32, site: u32) -> Option<u32> {
        self.ops.get(func as usize)?.get(site as usize).copied()
    }
}

fn is_call(op: &Operator<'_>) -> bool {
    matches!(op, Operator::Call { .. } | Operator::CallIndirect { .. })
}

/// The module hash a profile of `binary` carries.
pub fn module_hash(binary: &[u8]) -> String {
    crate::backend::cache::key(&[binary])
}

impl CallProfile {
    /// The profile a counting kernel's counter words `words` ([`WORDS_PER_SITE`] per site of
    /// `sites`) make, after `jobs` jobs of `binary`.
    pub fn from_counts(binary: &[u8], sites: &CallSites, words: &[u64], jobs: u64) -> Self {
        let mut out = Vec::new();
        for (f, ops) in sites.ops.iter().enumerate() {
            for s in 0..ops.len() as u32 {
                let at = sites.id(f as u32, s) as usize * WORDS_PER_SITE;
                let Some(w) = words.get(at..at + WORDS_PER_SITE) else {
                    continue;
                };
                if w[0] == 0 {
                    continue;
                }
                let mut targets: Vec<TargetCount> = (0..TARGET_WAYS)
                    .filter(|k| w[1 + 2 * k] != 0 && w[2 + 2 * k] != 0)
                    .map(|k| TargetCount {
                        func: (w[1 + 2 * k] - 1) as u32,
                        calls: w[2 + 2 * k],
                    })
                    .collect();
                targets.sort_by(|a, b| b.calls.cmp(&a.calls).then(a.func.cmp(&b.func)));
                out.push(SiteCount {
                    func: f as u32,
                    site: s,
                    calls: w[0],
                    targets,
                    other: w[WORDS_PER_SITE - 1],
                });
            }
        }
        CallProfile {
            format: FORMAT.into(),
            module: module_hash(binary),
            jobs,
            sites: out,
        }
    }

    /// Reads the profile at `path` and checks that it fits `module` (parsed from `binary`).
    pub fn load(path: &Path, binary: &[u8], module: &Module<'_>) -> Result<Self, ProfileError> {
        let shown = path.display().to_string();
        let read_err = |reason: String| ProfileError::Read {
            path: shown.clone(),
            reason,
        };
        let len = std::fs::metadata(path)
            .map_err(|e| read_err(e.to_string()))?
            .len();
        if len > MAX_PROFILE_BYTES {
            return Err(read_err(format!(
                "{len} bytes, more than the {MAX_PROFILE_BYTES} a profile may have"
            )));
        }
        let bytes = std::fs::read(path).map_err(|e| read_err(e.to_string()))?;
        let profile: CallProfile =
            serde_json::from_slice(&bytes).map_err(|e| ProfileError::Format {
                path: shown.clone(),
                reason: e.to_string(),
            })?;
        if profile.format != FORMAT {
            return Err(ProfileError::Format {
                path: shown,
                reason: format!("its format is `{}`", profile.format),
            });
        }
        profile.check(binary, module)?;
        Ok(profile)
    }

    /// `Ok` if this profile was recorded for `binary` and every site and target it names is
    /// one of `module`'s.
    pub fn check(&self, binary: &[u8], module: &Module<'_>) -> Result<(), ProfileError> {
        let expected = module_hash(binary);
        if self.module != expected {
            return Err(ProfileError::OtherModule {
                found: self.module.clone(),
                expected,
            });
        }
        let sites = CallSites::of(module);
        for s in &self.sites {
            let op = sites
                .op_of(s.func, s.site)
                .and_then(|i| module.body(s.func)?.ops.get(i as usize));
            let Some(op) = op else {
                return Err(ProfileError::Mismatch(format!(
                    "function {} has no call site {}",
                    s.func, s.site
                )));
            };
            let indirect = matches!(op, Operator::CallIndirect { .. });
            if !indirect && (!s.targets.is_empty() || s.other != 0) {
                return Err(ProfileError::Mismatch(format!(
                    "call site {} of function {} is a `call`, yet the profile gives it targets",
                    s.site, s.func
                )));
            }
            if let Some(t) = s
                .targets
                .iter()
                .find(|t| t.func as usize >= module.funcs.len())
            {
                return Err(ProfileError::Mismatch(format!(
                    "call site {} of function {} reached function {}, which the module does \
                     not have",
                    s.site, s.func, t.func
                )));
            }
        }
        Ok(())
    }

    /// The profile as a file's text.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default()
    }
}

/// A profile looked up by site, for the translator.
#[derive(Debug, Default)]
pub(crate) struct ProfileIndex<'p> {
    /// The module's call sites.
    pub sites: CallSites,
    by_site: HashMap<(u32, u32), &'p SiteCount>,
    /// Jobs the profile covers (at least 1).
    pub jobs: u64,
}

impl<'p> ProfileIndex<'p> {
    /// `profile` over `module`'s sites.
    pub fn new(module: &Module<'_>, profile: &'p CallProfile) -> Self {
        ProfileIndex {
            sites: CallSites::of(module),
            by_site: profile
                .sites
                .iter()
                .map(|s| ((s.func, s.site), s))
                .collect(),
            jobs: profile.jobs.max(1),
        }
    }

    /// What the call at operator `op_index` of `func` did (`None`: it never ran).
    pub fn at(&self, func: u32, op_index: usize) -> Option<&'p SiteCount> {
        let site = self.sites.site_at(func, op_index)?;
        self.by_site.get(&(func, site)).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const WAT: &str = r#"(module
      (type $t (func (result i32)))
      (table 2 funcref) (elem (i32.const 0) $a $b)
      (func $a (result i32) (i32.const 1))
      (func $b (result i32) (call $a))
      (func (export "go") (param i32) (result i32)
        (i32.add (call $b) (call_indirect (type $t) (local.get 0)))))"#;

    #[test]
    fn sites_are_numbered_over_the_module_and_found_by_operator() {
        let bin = wat::parse_str(WAT).unwrap();
        let m = crate::frontend::load(&bin).unwrap();
        let s = CallSites::of(&m);
        assert_eq!(s.total(), 3);
        assert_eq!((s.count(0), s.count(1), s.count(2)), (0, 1, 2));
        assert_eq!(s.id(2, 1), 2);
        let go = m.body(2).unwrap();
        let ci = go
            .ops
            .iter()
            .position(|op| matches!(op, Operator::CallIndirect { .. }))
            .unwrap();
        assert_eq!(s.site_at(2, ci), Some(1));
        assert_eq!(s.site_at(2, 0), Some(0));
        assert_eq!(s.site_at(2, 1), None);
    }

    #[test]
    fn counts_become_sites_and_a_profile_of_another_module_is_refused() {
        let bin = wat::parse_str(WAT).unwrap();
        let m = crate::frontend::load(&bin).unwrap();
        let sites = CallSites::of(&m);
        let mut words = vec![0u64; 3 * WORDS_PER_SITE];
        words[0] = 5; // $b calls $a 5 times
        let w = &mut words[2 * WORDS_PER_SITE..];
        w[0] = 7;
        (w[1], w[2], w[3], w[4]) = (1, 2, 2, 5); // targets 0 (2 calls) and 1 (5 calls)
        let p = CallProfile::from_counts(&bin, &sites, &words, 7);
        assert_eq!(p.sites.len(), 2);
        assert_eq!(p.sites[1].targets[0], TargetCount { func: 1, calls: 5 });
        assert!(p.check(&bin, &m).is_ok());
        let other = wat::parse_str("(module (func))").unwrap();
        let om = crate::frontend::load(&other).unwrap();
        assert!(matches!(
            p.check(&other, &om),
            Err(ProfileError::OtherModule { .. })
        ));
        let mut bad = p.clone();
        bad.sites[0].site = 9;
        assert!(matches!(
            bad.check(&bin, &m),
            Err(ProfileError::Mismatch(_))
        ));
        let mut bad = p;
        bad.sites[0].targets.push(TargetCount { func: 0, calls: 1 });
        assert!(matches!(
            bad.check(&bin, &m),
            Err(ProfileError::Mismatch(_))
        ));
    }
}
