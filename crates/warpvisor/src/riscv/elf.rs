//! Loading a static RISC-V Linux executable: its segments at their virtual addresses, its entry
//! point, its function symbols and where its program headers sit in memory (for `AT_PHDR`).
//! Every size and address is checked before anything is allocated.

use object::elf;
use object::read::elf::{ElfFile64, FileHeader, ProgramHeader};
use object::{Endianness, Object, ObjectSymbol, SymbolKind};

use super::RiscvError;

/// The lowest address a segment may occupy: the translated program's runtime keeps its own
/// scratch data below it (where Linux keeps the unmapped zero page).
pub const LOWEST_ADDRESS: u64 = 0x1_0000;

/// The highest address (exclusive) a segment may reach: a WebAssembly memory has 32-bit
/// addresses, and the stack and heap must fit above the image.
pub const HIGHEST_ADDRESS: u64 = 0xC000_0000;

/// A loadable segment.
#[derive(Clone, Debug)]
pub struct Segment {
    /// Its virtual address.
    pub vaddr: u64,
    /// The bytes the file gives it (`p_filesz`); the rest up to `mem_size` is zeros.
    pub data: Vec<u8>,
    /// Its size in memory (`p_memsz`).
    pub mem_size: u64,
    /// Whether it holds code.
    pub executable: bool,
}

/// A function symbol.
#[derive(Clone, Debug)]
pub struct Symbol {
    /// Its name.
    pub name: String,
    /// Its address.
    pub addr: u64,
    /// Its size in bytes (0 when the symbol does not say).
    pub size: u64,
}

/// A static RISC-V executable, checked and loaded.
#[derive(Clone, Debug)]
pub struct ElfImage {
    /// The entry point.
    pub entry: u64,
    /// The loadable segments, by address, not overlapping.
    pub segments: Vec<Segment>,
    /// Function symbols inside executable segments.
    pub functions: Vec<Symbol>,
    /// Where the program headers are in memory (`AT_PHDR`), their count and entry size.
    pub phdr: (u64, u64, u64),
    /// Whether the code uses compressed instructions (the `RVC` flag).
    pub compressed: bool,
}

impl ElfImage {
    /// The end of the highest segment in memory.
    pub fn end(&self) -> u64 {
        self.segments
            .iter()
            .map(|s| s.vaddr + s.mem_size)
            .max()
            .unwrap_or(LOWEST_ADDRESS)
    }

    /// The bytes of the executable segment holding `addr`, from `addr` to the segment's end of
    /// file data.
    pub fn code_at(&self, addr: u64) -> Option<&[u8]> {
        self.segments.iter().find_map(|s| {
            let off = addr.checked_sub(s.vaddr)?;
            (s.executable && off < s.data.len() as u64).then(|| &s.data[off as usize..])
        })
    }

    /// The `len` file bytes of any segment at `addr`.
    pub fn data_at(&self, addr: u64, len: usize) -> Option<&[u8]> {
        self.segments.iter().find_map(|s| {
            let off = usize::try_from(addr.checked_sub(s.vaddr)?).ok()?;
            s.data.get(off..off.checked_add(len)?)
        })
    }

    /// Parses and checks `bytes`.
    pub fn parse(bytes: &[u8]) -> Result<ElfImage, RiscvError> {
        let bad = |why: String| RiscvError::Elf(why);
        if bytes.len() < 64 || &bytes[..4] != b"\x7fELF" {
            return Err(bad("not an ELF file".into()));
        }
        if bytes[4] != elf::ELFCLASS64 {
            return Err(bad(
                "a 32-bit ELF file: only RV64 executables are supported".into(),
            ));
        }
        if bytes[5] != elf::ELFDATA2LSB {
            return Err(bad("a big-endian ELF file".into()));
        }
        let file = ElfFile64::<Endianness>::parse(bytes)
            .map_err(|e| bad(format!("malformed ELF file: {e}")))?;
        let header = file.elf_header();
        let endian = file.endian();
        if header.e_machine(endian) != elf::EM_RISCV {
            return Err(bad(format!(
                "not a RISC-V executable (machine {})",
                header.e_machine(endian)
            )));
        }
        match header.e_type(endian) {
            elf::ET_EXEC => {}
            elf::ET_DYN => {
                return Err(bad(
                    "a position-independent or shared object: build the program with -static \
                     -no-pie"
                        .into(),
                ))
            }
            t => return Err(bad(format!("not an executable (ELF type {t})"))),
        }
        let flags = header.e_flags(endian);
        let entry = header.e_entry(endian);
        let phoff = header.e_phoff(endian);
        let phentsize = header.e_phentsize(endian) as u64;
        let mut segments: Vec<Segment> = Vec::new();
        let mut phdr_addr = None;
        for ph in file.elf_program_headers() {
            match ph.p_type(endian) {
                elf::PT_INTERP | elf::PT_DYNAMIC => {
                    return Err(bad(
                        "a dynamically linked executable: build the program with -static".into(),
                    ))
                }
                elf::PT_LOAD => {}
                _ => continue,
            }
            let (vaddr, mem_size) = (ph.p_vaddr(endian), ph.p_memsz(endian));
            let (offset, file_size) = (ph.p_offset(endian), ph.p_filesz(endian));
            let end = vaddr
                .checked_add(mem_size)
                .filter(|&e| vaddr >= LOWEST_ADDRESS && e <= HIGHEST_ADDRESS)
                .ok_or_else(|| {
                    bad(format!(
                        "segment at {vaddr:#x} of {mem_size:#x} bytes lies outside \
                         {LOWEST_ADDRESS:#x}..{HIGHEST_ADDRESS:#x}"
                    ))
                })?;
            if file_size > mem_size {
                return Err(bad(format!(
                    "segment at {vaddr:#x} has more file bytes ({file_size:#x}) than memory \
                     ({mem_size:#x})"
                )));
            }
            let data = offset
                .checked_add(file_size)
                .and_then(|e| bytes.get(offset as usize..e as usize))
                .ok_or_else(|| {
                    bad(format!(
                        "segment at {vaddr:#x} reads past the end of the file"
                    ))
                })?;
            if let Some(other) = segments
                .iter()
                .find(|s| vaddr < s.vaddr + s.mem_size && s.vaddr < end)
            {
                return Err(bad(format!(
                    "segments at {vaddr:#x} and {:#x} overlap",
                    other.vaddr
                )));
            }
            if (offset..offset + file_size).contains(&phoff) {
                phdr_addr = Some(vaddr + (phoff - offset));
            }
            segments.push(Segment {
                vaddr,
                data: data.to_vec(),
                mem_size,
                executable: ph.p_flags(endian) & elf::PF_X != 0,
            });
        }
        segments.sort_by_key(|s| s.vaddr);
        if segments.is_empty() {
            return Err(bad("no loadable segments".into()));
        }
        let mut image = ElfImage {
            entry,
            segments,
            functions: Vec::new(),
            phdr: (
                phdr_addr.unwrap_or(0),
                header.e_phnum(endian) as u64,
                phentsize,
            ),
            compressed: flags & elf::EF_RISCV_RVC != 0,
        };
        if image.code_at(entry).is_none() {
            return Err(bad(format!(
                "entry point {entry:#x} is not inside an executable segment"
            )));
        }
        for sym in file.symbols() {
            if sym.kind() != SymbolKind::Text {
                continue;
            }
            let addr = sym.address();
            if image.code_at(addr).is_none() {
                continue;
            }
            image.functions.push(Symbol {
                name: sym.name().unwrap_or("").to_string(),
                addr,
                size: sym.size(),
            });
        }
        image.functions.sort_by_key(|s| s.addr);
        image.functions.dedup_by_key(|s| s.addr);
        Ok(image)
    }
}
