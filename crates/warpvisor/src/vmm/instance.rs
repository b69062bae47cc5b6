//! Instantiation: the image every VM starts from (globals, tables, segments, memory size),
//! computed once on the host and applied on the device by the kernels' reset entry.

use std::time::Instant;

use wasmparser::ValType;

use super::fleet::Parked;
use super::{Fleet, Outcome, TrapKind, Value, VmmError};
use crate::abi::fleet::segment_mode;
use crate::abi::status;
use crate::frontend::{ConstExpr, Module, SegmentMode};
use crate::layout::PAGE;

/// The value of a constant expression.
pub(super) fn eval(expr: &ConstExpr, globals: &[Value], ty: ValType) -> Value {
    match *expr {
        ConstExpr::I32(v) => Value::I32(v),
        ConstExpr::I64(v) => Value::I64(v),
        ConstExpr::F32(b) => Value::F32(b),
        ConstExpr::F64(b) => Value::F64(b),
        ConstExpr::RefNull => Value::zero(ty),
        ConstExpr::RefFunc(f) => Value::FuncRef(Some(f)),
        ConstExpr::GlobalGet(g) => globals.get(g as usize).copied().unwrap_or(Value::zero(ty)),
    }
}

/// The initial value of every global: imported ones from `imported` (in import order), the
/// others from their initializers, which may read earlier globals.
pub(super) fn initial_globals(m: &Module<'_>, imported: &[Value]) -> Vec<Value> {
    let mut globals: Vec<Value> = Vec::new();
    let mut imported = imported.iter();
    for g in &m.globals {
        let v = match &g.init {
            Some(e) => eval(e, &globals, g.ty),
            None => imported.next().copied().unwrap_or(Value::zero(g.ty)),
        };
        globals.push(v);
    }
    globals
}

/// The references of every element segment, in order (the element blob).
pub(super) fn element_blob(m: &Module<'_>, globals: &[Value]) -> Vec<u32> {
    m.elems
        .iter()
        .flat_map(|seg| {
            seg.items
                .iter()
                .map(|item| eval(item, globals, ValType::Ref(seg.element)).to_word() as u32)
        })
        .collect()
}

impl Fleet {
    /// Puts every VM back in its freshly instantiated state.
    pub fn reset(&mut self) -> Result<(), VmmError> {
        let globals = initial_globals(&self.program.module, &self.imports.globals);
        self.instantiate(&globals)
    }

    /// Applies the image to every VM, then runs the start function. The image and the reset
    /// count as instantiation, the start function's run as any run.
    pub(super) fn instantiate(&mut self, globals: &[Value]) -> Result<(), VmmError> {
        let start = Instant::now();
        let moved = self.storage.transfer;
        let result = self.apply_image(globals);
        let transfer = self.storage.transfer.saturating_sub(moved);
        self.stats.instantiate += start.elapsed().saturating_sub(transfer);
        result?;
        self.run_start()
    }

    /// The image words: initial pages, globals, table sizes, and each segment's
    /// mode, offset and table. Fails as instantiation would (segments out of bounds, element
    /// segments first).
    fn image(&self, globals: &[Value]) -> Result<Vec<u64>, VmmError> {
        let m = &self.program.module;
        let img = self.storage.shape().image();
        let mut words = vec![0u64; img.words()];
        words[crate::abi::ImageLayout::PAGES] = self.initial_pages as u64;
        for (g, v) in globals.iter().enumerate() {
            words[img.global(g as u32)] = v.to_word();
        }
        for (t, init) in self.table_initial.iter().enumerate() {
            words[img.table_size(t as u32)] = *init as u64;
        }
        let ndata = m.datas.len() as u32;
        for (i, seg) in m.elems.iter().enumerate() {
            let at = img.segment(ndata + i as u32);
            match seg.mode {
                SegmentMode::Passive => words[at] = segment_mode::PASSIVE,
                SegmentMode::Declared => words[at] = segment_mode::DECLARED,
                SegmentMode::Active { target, offset } => {
                    let off = eval(&offset, globals, ValType::I32).to_word() as u32 as u64;
                    let size = self
                        .table_initial
                        .get(target as usize)
                        .copied()
                        .unwrap_or(0);
                    if off + seg.items.len() as u64 > size as u64 {
                        return Err(VmmError::InstantiationTrap(TrapKind::TableOutOfBounds));
                    }
                    words[at] = segment_mode::ACTIVE;
                    words[at + 1] = off;
                    words[at + 2] = target as u64;
                }
            }
        }
        for (i, seg) in m.datas.iter().enumerate() {
            let at = img.segment(i as u32);
            if let SegmentMode::Active { offset, .. } = seg.mode {
                let off = eval(&offset, globals, ValType::I32).to_word() as u32 as u64;
                if off + seg.bytes.len() as u64 > self.initial_pages as u64 * PAGE {
                    return Err(VmmError::InstantiationTrap(TrapKind::MemoryOutOfBounds));
                }
                words[at] = segment_mode::ACTIVE;
                words[at + 1] = off;
            }
        }
        Ok(words)
    }

    fn apply_image(&mut self, globals: &[Value]) -> Result<(), VmmError> {
        let image = self.image(globals)?;
        self.storage.write_image(&image)?;
        let every: Vec<u32> = (0..self.num_vms()).collect();
        self.reset_vms(&every)
    }

    /// Puts `vms` back to the image last written (one reset launch; the other VMs are left
    /// as they are, running or not).
    pub(super) fn reset_vms(&mut self, vms: &[u32]) -> Result<(), VmmError> {
        for &vm in vms {
            if let Some(ctl) = self.storage.controls.get_mut(vm as usize) {
                ctl.status = status::RESET;
                self.host_stops[vm as usize] = None;
                self.parked[vm as usize] = Parked::No;
            }
        }
        self.storage.mark_dirty();
        self.storage.push_controls()?;
        let program = self.program.clone();
        let kernel = program
            .kernels
            .first()
            .ok_or_else(|| VmmError::Limit("the program has no kernel".into()))?;
        kernel.reset(self.storage.device())?;
        self.storage.pull_controls()
    }

    fn run_start(&mut self) -> Result<(), VmmError> {
        let program = self.program.clone();
        if let Some(start) = program.module.start {
            let n = self.num_vms() as usize;
            let outcomes = self.run_function(start, &vec![Vec::new(); n])?;
            if let Some(Outcome::Trapped(kind)) = outcomes
                .into_iter()
                .find(|o| matches!(o, Outcome::Trapped(_)))
            {
                return Err(VmmError::InstantiationTrap(kind));
            }
        }
        Ok(())
    }
}
