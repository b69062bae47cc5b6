//! Source lines of a module's instructions, from its DWARF (`.debug_line`), so the report can
//! name the lines that lose the most and not only the functions.
//!
//! WebAssembly's DWARF addresses are offsets into the code section's contents; every
//! instruction of every basic block is looked up at its operator's offset. A module without
//! debug sections, or with ones that do not parse, has no source lines (the report then names
//! functions and blocks only): debug information is a help, never a reason to fail.

use std::collections::HashMap;

use gimli::{EndianSlice, LittleEndian};
use serde::{Deserialize, Serialize};
use wasmparser::{Parser, Payload};

use super::blocks::{is_marker, BlockTable};

/// Where each basic block's instructions come from in the program's source.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceLines {
    /// Source files, as the compiler named them (with their directory).
    pub files: Vec<String>,
    /// Distinct `(file, line)` pairs.
    pub lines: Vec<(u32, u32)>,
    /// Per global block id: its instructions in order, as runs of `(index into lines, count)`
    /// (instructions without a line have none).
    pub blocks: Vec<Vec<(u32, u32)>>,
}

impl SourceLines {
    /// The source lines of `binary`'s blocks `table`, if the module carries line information.
    pub fn of(binary: &[u8], table: &BlockTable) -> Option<SourceLines> {
        let code = CodeOffsets::of(binary)?;
        let rows = line_rows(&code.debug)?;
        let mut out = SourceLines::default();
        let mut line_index: HashMap<(u32, u32), u32> = HashMap::new();
        // The line table's file index → this map's (only files some instruction uses).
        let mut file_ids: Vec<Option<u32>> = vec![None; rows.files.len()];
        let mut any = false;
        for &(f, b) in &table.ids {
            let mut runs: Vec<(u32, u32)> = Vec::new();
            let ops = table.function(f).zip(
                f.checked_sub(code.imported)
                    .and_then(|i| code.funcs.get(i as usize)),
            );
            if let Some((fb, ops)) = ops {
                let start = fb.blocks.get(b as usize).map_or(0, |k| k.first_op as usize);
                let end = fb
                    .blocks
                    .get(b as usize + 1)
                    .map_or(ops.len(), |k| k.first_op as usize);
                for &(offset, marker) in ops.get(start..end).unwrap_or(&[]) {
                    if marker {
                        continue;
                    }
                    let Some((file, line)) = rows.lookup(offset) else {
                        continue;
                    };
                    let Some(slot) = file_ids.get_mut(file as usize) else {
                        continue;
                    };
                    let file_id = *slot.get_or_insert_with(|| {
                        out.files.push(rows.files[file as usize].clone());
                        out.files.len() as u32 - 1
                    });
                    let next = line_index.len() as u32;
                    let id = *line_index.entry((file_id, line)).or_insert_with(|| {
                        out.lines.push((file_id, line));
                        next
                    });
                    any = true;
                    match runs.last_mut() {
                        Some((l, n)) if *l == id => *n += 1,
                        _ => runs.push((id, 1)),
                    }
                }
            }
            out.blocks.push(runs);
        }
        any.then_some(out)
    }

    /// `file:line` of line `index`.
    pub fn describe(&self, index: u32) -> String {
        match self.lines.get(index as usize) {
            Some(&(file, line)) => format!(
                "{}:{line}",
                self.files.get(file as usize).map_or("?", String::as_str)
            ),
            None => "?".into(),
        }
    }
}

/// Each defined function's operators: code-section offset and whether it is a structure
/// marker (not an instruction), in the order the block table counts them.
struct CodeOffsets<'a> {
    imported: u32,
    funcs: Vec<Vec<(u64, bool)>>,
    debug: HashMap<&'a str, &'a [u8]>,
}

impl<'a> CodeOffsets<'a> {
    fn of(binary: &'a [u8]) -> Option<CodeOffsets<'a>> {
        let mut out = CodeOffsets {
            imported: 0,
            funcs: Vec::new(),
            debug: HashMap::new(),
        };
        let mut code_start = 0u64;
        for payload in Parser::new(0).parse_all(binary) {
            match payload.ok()? {
                Payload::ImportSection(r) => {
                    for import in r.into_imports() {
                        if matches!(
                            import.ok()?.ty,
                            wasmparser::TypeRef::Func(_) | wasmparser::TypeRef::FuncExact(_)
                        ) {
                            out.imported += 1;
                        }
                    }
                }
                // Offsets count from the section's contents (its function count first).
                Payload::CodeSectionStart {
                    unchecked_range, ..
                } => code_start = unchecked_range.start,
                Payload::CodeSectionEntry(body) => {
                    let mut ops = Vec::new();
                    let mut reader = body.get_operators_reader().ok()?;
                    while !reader.eof() {
                        let at = reader.original_position();
                        let op = reader.read().ok()?;
                        ops.push((at.checked_sub(code_start)?, is_marker(&op)));
                    }
                    out.funcs.push(ops);
                }
                Payload::CustomSection(c) if c.name().starts_with(".debug_") => {
                    out.debug.insert(c.name(), c.data());
                }
                _ => {}
            }
        }
        out.debug.contains_key(".debug_line").then_some(out)
    }
}

/// The line table of every compilation unit: sorted rows of (address, file, line), where a
/// row with no file ends a sequence.
struct LineRows {
    rows: Vec<(u64, Option<(u32, u32)>)>,
    files: Vec<String>,
}

impl LineRows {
    /// The file and line of the instruction at `address`.
    fn lookup(&self, address: u64) -> Option<(u32, u32)> {
        let at = self.rows.partition_point(|&(a, _)| a <= address);
        self.rows.get(at.checked_sub(1)?)?.1
    }
}

fn line_rows(debug: &HashMap<&str, &[u8]>) -> Option<LineRows> {
    let section = |id: gimli::SectionId| -> Result<EndianSlice<'_, LittleEndian>, ()> {
        Ok(EndianSlice::new(
            debug.get(id.name()).copied().unwrap_or(&[]),
            LittleEndian,
        ))
    };
    let dwarf = gimli::Dwarf::load(section).ok()?;
    let mut out = LineRows {
        rows: Vec::new(),
        files: Vec::new(),
    };
    let mut file_ids: HashMap<String, u32> = HashMap::new();
    let mut units = dwarf.units();
    while let Ok(Some(header)) = units.next() {
        let Ok(unit) = dwarf.unit(header) else {
            continue;
        };
        let Some(program) = unit.line_program.clone() else {
            continue;
        };
        let mut rows = program.rows();
        while let Ok(Some((header, row))) = rows.next_row() {
            if row.end_sequence() {
                out.rows.push((row.address(), None));
                continue;
            }
            let (Some(file), Some(line)) = (row.file(header), row.line()) else {
                continue;
            };
            let name = file_name(&dwarf, &unit, header, file);
            let next = file_ids.len() as u32;
            let id = *file_ids.entry(name.clone()).or_insert_with(|| {
                out.files.push(name);
                next
            });
            out.rows.push((
                row.address(),
                Some((id, line.get().min(u32::MAX as u64) as u32)),
            ));
        }
    }
    // Sequences may come in any order: at one address a sequence's end comes before the
    // next one's start, and among rows of one sequence the last wins (a stable sort).
    out.rows.sort_by_key(|&(a, r)| (a, r.is_some()));
    (!out.rows.is_empty()).then_some(out)
}

type Slice<'a> = EndianSlice<'a, LittleEndian>;

fn file_name(
    dwarf: &gimli::Dwarf<Slice<'_>>,
    unit: &gimli::Unit<Slice<'_>>,
    header: &gimli::LineProgramHeader<Slice<'_>>,
    file: &gimli::FileEntry<Slice<'_>>,
) -> String {
    let text = |v: gimli::AttributeValue<Slice<'_>>| {
        dwarf
            .attr_string(unit, v)
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default()
    };
    let name = text(file.path_name());
    match file.directory(header).map(text) {
        Some(dir) if !dir.is_empty() && !name.starts_with('/') => format!("{dir}/{name}"),
        _ => name,
    }
}
