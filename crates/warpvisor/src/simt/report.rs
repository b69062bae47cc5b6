//! The analysis as people and tools read it: Markdown, JSON ([`Report`] is `Serialize`) and an
//! SVG chart of per-function efficiency.

use std::fmt::Write;

use serde::Serialize;

use super::memory::INTERLEAVES;
use super::replay::{CallModel, Cfg, Grouping, WidthResult};
use super::trace::{Region, Trace};

/// Efficiency at one warp width.
#[derive(Debug, Clone, Serialize)]
pub struct WidthRow {
    /// Lanes per warp.
    pub width: u32,
    /// Eq. 1 over every issued instruction.
    pub efficiency: f64,
    /// The mean of each warp's own Eq. 1.
    pub warp_mean_efficiency: f64,
    /// Instructions the warps issued.
    pub issued: u64,
    /// Instructions the lanes executed.
    pub executed: u64,
    /// Kernel launches per warp, on average (hypercalls relaunch).
    pub launches_per_warp: f64,
}

/// One function at the widest width, its callees excluded.
#[derive(Debug, Clone, Serialize)]
pub struct FunctionRow {
    /// Function index.
    pub index: u32,
    /// Its name.
    pub name: String,
    /// Eq. 1 over its own instructions.
    pub efficiency: f64,
    /// Its share of the instructions the warps issued.
    pub issued_share: f64,
    /// Lane slots it leaves idle: issued × width − executed.
    pub idle_lanes: u64,
}

/// A divergent branch at the widest width: the lane slots its divergence left idle.
#[derive(Debug, Clone, Serialize)]
pub struct BranchRow {
    /// The function.
    pub function: String,
    /// Function index.
    pub index: u32,
    /// The branch's block in the function (`None`: lanes resumed at different places after
    /// hypercalls).
    pub block: Option<u32>,
    /// The block where its lanes reconverge (the immediate post-dominator; the function's
    /// block count is its exit).
    pub reconverges_at: Option<u32>,
    /// Its share of every idle lane slot.
    pub idle_share: f64,
    /// The source line of the branch (its block's last instruction), when the module has
    /// DWARF.
    pub source: Option<String>,
}

/// A source line at the widest width (from the module's DWARF), its instructions only.
#[derive(Debug, Clone, Serialize)]
pub struct LineRow {
    /// `file:line`.
    pub location: String,
    /// The function its instructions are in (the first, where inlining spread it).
    pub function: String,
    /// Eq. 1 over its instructions.
    pub efficiency: f64,
    /// Its share of the instructions the warps issued.
    pub issued_share: f64,
    /// Lane slots it leaves idle: issued × width − executed.
    pub idle_lanes: u64,
}

/// Memory of one region at the widest width.
#[derive(Debug, Clone, Serialize)]
pub struct RegionRow {
    /// Stack, data or heap.
    pub region: Region,
    /// Warp memory instructions.
    pub instructions: u64,
    /// Sectors per warp instruction at interleave 0, 4 and 8.
    pub sectors_per_instruction: [f64; 3],
}

/// What `warpvisor simt analyze` reports.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// Jobs (threads) analysed.
    pub jobs: usize,
    /// What ran.
    pub entry: String,
    /// How warps were formed.
    pub grouping: Grouping,
    /// Which control flow gave the reconvergence points.
    pub cfg: Cfg,
    /// How calls ran.
    pub calls: CallModel,
    /// Jobs whose trace was cut short by the recorder's limit.
    pub truncated_jobs: usize,
    /// One row per width, narrowest first.
    pub widths: Vec<WidthRow>,
    /// The width the function and memory rows are for (the widest).
    pub detail_width: u32,
    /// Functions that issued instructions, most idle lanes first.
    pub functions: Vec<FunctionRow>,
    /// The source lines that leave the most lanes idle, most first (at most ten; none when
    /// the module has no DWARF line information).
    pub lines: Vec<LineRow>,
    /// The divergent branches that left the most lanes idle, most first (at most ten).
    pub branches: Vec<BranchRow>,
    /// The share of idle lane slots of lanes that had finished, waited at a hypercall or
    /// were missing from a short warp.
    pub idle_elsewhere_share: f64,
    /// Memory per region.
    pub memory: Vec<RegionRow>,
    /// Sectors per memory instruction over all regions, at interleave 0, 4 and 8.
    pub sectors_per_instruction: [f64; 3],
    /// The interleave with the fewest sectors.
    pub recommended_interleave: u32,
}

impl Report {
    /// The report of `results` (one per width) for `trace`.
    pub fn new(trace: &Trace, grouping: Grouping, results: &[WidthResult]) -> Report {
        let mut sorted: Vec<&WidthResult> = results.iter().collect();
        sorted.sort_by_key(|r| r.width);
        let widths = sorted
            .iter()
            .map(|r| WidthRow {
                width: r.width,
                efficiency: r.efficiency(),
                warp_mean_efficiency: r.warp_mean_efficiency,
                issued: r.counts.lockstep,
                executed: r.counts.thread,
                launches_per_warp: r.launches as f64 / r.warps.max(1) as f64,
            })
            .collect();
        let detail = sorted.last().copied();
        let detail_width = detail.map_or(0, |r| r.width);
        let mut functions = Vec::new();
        let mut branches = Vec::new();
        let mut idle_elsewhere_share = 0.0;
        let mut memory = Vec::new();
        let mut total_sectors = [0u64; 3];
        let mut total_instructions = 0u64;
        if let Some(r) = detail {
            let issued = r.counts.lockstep.max(1) as f64;
            for (f, c) in r.per_function.iter().enumerate() {
                if c.lockstep == 0 {
                    continue;
                }
                functions.push(FunctionRow {
                    index: f as u32,
                    name: trace.header.functions.get(f).cloned().unwrap_or_default(),
                    efficiency: c.efficiency(r.width),
                    issued_share: c.lockstep as f64 / issued,
                    idle_lanes: c.lockstep * r.width as u64 - c.thread,
                });
            }
            functions.sort_by(|a, b| b.idle_lanes.cmp(&a.idle_lanes).then(a.index.cmp(&b.index)));
            let idle = (r.counts.lockstep * r.width as u64).saturating_sub(r.counts.thread);
            let idle = idle.max(1) as f64;
            idle_elsewhere_share = r.idle_elsewhere as f64 / idle;
            let mut by_cost: Vec<(u32, u64)> = r.divergence.iter().map(|(&o, &c)| (o, c)).collect();
            by_cost.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
            for (origin, cost) in by_cost.into_iter().take(10) {
                let located = trace.header.blocks.locate(origin);
                let (index, block) = located.map_or((0, None), |(f, b)| (f, Some(b)));
                let reconverges_at = block.and_then(|b| {
                    trace
                        .header
                        .blocks
                        .function(index)
                        .and_then(|fb| fb.ipdom.get(b as usize).copied())
                });
                branches.push(BranchRow {
                    function: located
                        .and_then(|(f, _)| trace.header.functions.get(f as usize).cloned())
                        .unwrap_or_else(|| "(hypercall relaunch)".into()),
                    index,
                    block,
                    reconverges_at,
                    idle_share: cost as f64 / idle,
                    source: trace.header.source.as_ref().and_then(|src| {
                        let (line, _) = src.blocks.get(origin as usize)?.last()?;
                        Some(src.describe(*line))
                    }),
                });
            }
            for (region, m) in &r.memory {
                total_instructions += m.instructions;
                for (total, add) in total_sectors.iter_mut().zip(m.sectors) {
                    *total += add;
                }
                memory.push(RegionRow {
                    region: *region,
                    instructions: m.instructions,
                    sectors_per_instruction: per(m.sectors, m.instructions),
                });
            }
        }
        let lines = detail.map_or_else(Vec::new, |r| line_rows(trace, r));
        let best = (0..3).min_by_key(|&k| (total_sectors[k], k)).unwrap_or(0);
        Report {
            jobs: trace.jobs.len(),
            entry: trace.header.entry.clone(),
            grouping,
            cfg: Cfg::Static,
            calls: CallModel::Continuations,
            truncated_jobs: trace.jobs.iter().filter(|j| j.truncated).count(),
            widths,
            detail_width,
            functions,
            lines,
            branches,
            idle_elsewhere_share,
            memory,
            sectors_per_instruction: per(total_sectors, total_instructions),
            recommended_interleave: INTERLEAVES[best],
        }
    }

    /// The worst `n` source lines (most idle lane slots; none without DWARF).
    pub fn worst_lines(&self, n: usize) -> &[LineRow] {
        &self.lines[..n.min(self.lines.len())]
    }

    /// The worst `n` functions (most idle lane slots).
    pub fn worst(&self, n: usize) -> &[FunctionRow] {
        &self.functions[..n.min(self.functions.len())]
    }

    /// The report for people.
    pub fn markdown(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "# SIMT analysis: `{}`, {} jobs, warps of {} jobs, {} control flow, {}\n",
            self.entry,
            self.jobs,
            match self.grouping {
                Grouping::Consecutive => "consecutive",
                Grouping::Similar => "similar-length",
            },
            match self.cfg {
                Cfg::Static => "static",
                Cfg::Dynamic => "dynamic",
            },
            match self.calls {
                CallModel::Continuations => "calls through the trampoline (continuations)",
                CallModel::Direct => "native calls",
            }
        );
        if self.truncated_jobs > 0 {
            let _ = writeln!(
                s,
                "**{} jobs' traces were cut short** (the recorder's limit): their rest is missing.\n",
                self.truncated_jobs
            );
        }
        s.push_str("## SIMT efficiency (Eq. 1: executed / (issued × width))\n\n");
        s.push_str(
            "| width | efficiency | mean per warp | issued | executed | launches per warp |\n",
        );
        s.push_str("|---:|---:|---:|---:|---:|---:|\n");
        for w in &self.widths {
            let _ = writeln!(
                s,
                "| {} | {:.1}% | {:.1}% | {} | {} | {:.1} |",
                w.width,
                100.0 * w.efficiency,
                100.0 * w.warp_mean_efficiency,
                w.issued,
                w.executed,
                w.launches_per_warp
            );
        }
        let _ = writeln!(
            s,
            "\n## Functions at width {} (own instructions, most idle lanes first)\n",
            self.detail_width
        );
        s.push_str("| function | efficiency | share of issued | idle lane slots |\n");
        s.push_str("|---|---:|---:|---:|\n");
        for f in self.functions.iter().take(15) {
            let _ = writeln!(
                s,
                "| `{}` ({}) | {:.1}% | {:.1}% | {} |",
                f.name.replace('|', "\\|"),
                f.index,
                100.0 * f.efficiency,
                100.0 * f.issued_share,
                f.idle_lanes
            );
        }
        if !self.lines.is_empty() {
            let _ = writeln!(
                s,
                "\n## Source lines at width {} (DWARF; most idle lanes first)\n",
                self.detail_width
            );
            s.push_str("| line | function | efficiency | share of issued | idle lane slots |\n");
            s.push_str("|---|---|---:|---:|---:|\n");
            for l in &self.lines {
                let _ = writeln!(
                    s,
                    "| `{}` | `{}` | {:.1}% | {:.1}% | {} |",
                    l.location.replace('|', "\\|"),
                    l.function.replace('|', "\\|"),
                    100.0 * l.efficiency,
                    100.0 * l.issued_share,
                    l.idle_lanes
                );
            }
        }
        let _ = writeln!(
            s,
            "\n## Divergent branches at width {} (their share of idle lane slots)\n",
            self.detail_width
        );
        let with_source = self.branches.iter().any(|b| b.source.is_some());
        s.push_str("| function | branch block | reconverges at block | idle share |");
        s.push_str(if with_source { " line |\n" } else { "\n" });
        s.push_str("|---|---:|---:|---:|");
        s.push_str(if with_source { "---|\n" } else { "\n" });
        for b in &self.branches {
            let at = |x: Option<u32>| x.map_or("-".to_string(), |v| v.to_string());
            let _ = write!(
                s,
                "| `{}` ({}) | {} | {} | {:.1}% |",
                b.function.replace('|', "\\|"),
                b.index,
                at(b.block),
                at(b.reconverges_at),
                100.0 * b.idle_share
            );
            if with_source {
                let _ = write!(s, " `{}` |", b.source.as_deref().unwrap_or("-"));
            }
            s.push('\n');
        }
        let _ = writeln!(
            s,
            "| lanes finished, at a hypercall, or missing | | | {:.1}% |{}",
            100.0 * self.idle_elsewhere_share,
            if with_source { " |" } else { "" }
        );
        let _ = writeln!(
            s,
            "\n## Memory at width {}: 32-byte sectors per warp memory instruction\n",
            self.detail_width
        );
        s.push_str("| region | instructions | interleave 0 | interleave 4 | interleave 8 |\n");
        s.push_str("|---|---:|---:|---:|---:|\n");
        for m in &self.memory {
            let [a, b, c] = m.sectors_per_instruction;
            let _ = writeln!(
                s,
                "| {:?} | {} | {a:.2} | {b:.2} | {c:.2} |",
                m.region, m.instructions
            );
        }
        let [a, b, c] = self.sectors_per_instruction;
        let _ = writeln!(s, "| all | | {a:.2} | {b:.2} | {c:.2} |");
        let _ = writeln!(
            s,
            "\nRecommended: `--interleave {}` (fewest sectors).",
            self.recommended_interleave
        );
        s
    }

    /// A bar chart of the per-function efficiency of the functions that issue the most.
    pub fn svg(&self) -> String {
        let mut rows: Vec<&FunctionRow> = self.functions.iter().collect();
        rows.sort_by(|a, b| b.issued_share.total_cmp(&a.issued_share));
        rows.truncate(20);
        let (bar_h, left, width) = (22.0, 260.0, 420.0);
        let height = 40.0 + bar_h * rows.len() as f64;
        let mut s = format!(
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{height}\" \
             font-family=\"sans-serif\" font-size=\"12\">\n",
            left + width + 80.0
        );
        let _ = writeln!(
            s,
            "<text x=\"4\" y=\"16\">SIMT efficiency at width {} of the functions issuing the most</text>",
            self.detail_width
        );
        for (k, f) in rows.iter().enumerate() {
            let y = 28.0 + bar_h * k as f64;
            let w = width * f.efficiency.clamp(0.0, 1.0);
            let name: String = f.name.chars().take(36).collect();
            let _ = writeln!(
                s,
                "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>",
                left - 6.0,
                y + 14.0,
                xml_escape(&name)
            );
            let _ = writeln!(
                s,
                "<rect x=\"{left}\" y=\"{y}\" width=\"{w:.1}\" height=\"{}\" fill=\"#4878d0\"/>",
                bar_h - 4.0
            );
            let _ = writeln!(
                s,
                "<text x=\"{:.1}\" y=\"{}\">{:.0}% ({:.0}% of issued)</text>",
                left + w + 4.0,
                y + 14.0,
                100.0 * f.efficiency,
                100.0 * f.issued_share
            );
        }
        s.push_str("</svg>\n");
        s
    }
}

fn per(sectors: [u64; 3], instructions: u64) -> [f64; 3] {
    let n = instructions.max(1) as f64;
    [
        sectors[0] as f64 / n,
        sectors[1] as f64 / n,
        sectors[2] as f64 / n,
    ]
}

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The source lines that leave the most lanes idle in `r` (at most ten).
fn line_rows(trace: &Trace, r: &WidthResult) -> Vec<LineRow> {
    let Some(src) = &trace.header.source else {
        return Vec::new();
    };
    let table = &trace.header.blocks;
    // Per line: (issued, executed, the first function charged).
    let mut per_line: std::collections::HashMap<u32, (u64, u64, u32)> = Default::default();
    for (id, c) in r.per_block.iter().enumerate() {
        let (Some(block), Some(runs)) = (table.block(id as u32), src.blocks.get(id)) else {
            continue;
        };
        if c.lockstep == 0 || block.instructions == 0 {
            continue;
        }
        // Every instruction of a block issues as often, with as many lanes.
        let n = u64::from(block.instructions);
        let (issues, lanes) = (c.lockstep / n, c.thread / n);
        let func = table.locate(id as u32).map_or(0, |(f, _)| f);
        for &(line, count) in runs {
            let e = per_line.entry(line).or_insert((0, 0, func));
            e.0 += issues * u64::from(count);
            e.1 += lanes * u64::from(count);
        }
    }
    let issued = r.counts.lockstep.max(1) as f64;
    let width = u64::from(r.width);
    let mut rows: Vec<(u64, u32, LineRow)> = per_line
        .into_iter()
        .map(|(line, (lockstep, thread, func))| {
            let idle = (lockstep * width).saturating_sub(thread);
            let row = LineRow {
                location: src.describe(line),
                function: trace
                    .header
                    .functions
                    .get(func as usize)
                    .cloned()
                    .unwrap_or_default(),
                efficiency: thread as f64 / (lockstep * width).max(1) as f64,
                issued_share: lockstep as f64 / issued,
                idle_lanes: idle,
            };
            (idle, line, row)
        })
        .collect();
    rows.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    rows.into_iter().take(10).map(|(_, _, row)| row).collect()
}
