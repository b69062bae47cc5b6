//! The VMM's side of a fleet's storage: the device's buffers behind [`DeviceFleet`], and the
//! host's copy of every VM's control block. Each method is one gathered transfer.

use std::time::{Duration, Instant};

use super::VmmError;
use crate::abi::fleet::{controls_as_bytes, controls_as_bytes_mut};
use crate::abi::{FleetBuffer, FleetShape, PerVmArray, VmControl};
use crate::backend::{merge_adjacent, DeviceFleet, Traffic};

/// A fleet's storage and the host's copy of its control blocks.
pub(super) struct FleetStorage {
    device: Box<dyn DeviceFleet>,
    shape: FleetShape,
    /// Every VM's control block as the host last read or changed it.
    pub controls: Vec<VmControl>,
    /// Whether `controls` holds changes the device has not seen.
    dirty: bool,
    /// Time spent moving bytes between host and device.
    pub transfer: Duration,
}

impl FleetStorage {
    /// Wraps freshly created storage (all control blocks zero).
    pub fn new(device: Box<dyn DeviceFleet>) -> Self {
        let shape = *device.shape();
        FleetStorage {
            controls: vec![VmControl::default(); shape.layout.num_vms as usize],
            device,
            shape,
            dirty: false,
            transfer: Duration::ZERO,
        }
    }

    /// The sizes of the fleet's buffers.
    pub fn shape(&self) -> &FleetShape {
        &self.shape
    }

    /// The device's storage, for a kernel launch or a host function's view.
    pub fn device(&mut self) -> &mut dyn DeviceFleet {
        &mut *self.device
    }

    /// Bytes moved so far.
    pub fn traffic(&self) -> Traffic {
        self.device.traffic()
    }

    /// Notes that the host changed `controls`.
    pub fn mark_dirty(&mut self) {
        self.dirty = true;
    }

    fn timed<T>(&mut self, f: impl FnOnce(&mut Self) -> T) -> T {
        let start = Instant::now();
        let out = f(self);
        self.transfer += start.elapsed();
        out
    }

    /// Reads every control block (after a launch or a reset).
    pub fn pull_controls(&mut self) -> Result<(), VmmError> {
        self.timed(|s| {
            let bytes = 0..std::mem::size_of_val(s.controls.as_slice()) as u64;
            let out = controls_as_bytes_mut(&mut s.controls);
            s.device
                .read(FleetBuffer::Vms, std::slice::from_ref(&bytes), out)?;
            s.dirty = false;
            Ok(())
        })
    }

    /// Writes every control block if the host changed any (before a launch).
    pub fn push_controls(&mut self) -> Result<(), VmmError> {
        if !self.dirty {
            return Ok(());
        }
        self.timed(|s| {
            let bytes = 0..std::mem::size_of_val(s.controls.as_slice()) as u64;
            let all = std::slice::from_ref(&bytes);
            s.device
                .write(FleetBuffer::Vms, all, controls_as_bytes(&s.controls))?;
            s.dirty = false;
            Ok(())
        })
    }

    /// The first `words` result words of each VM in `vms` (ascending), in one transfer.
    pub fn read_results(&mut self, vms: &[(u32, u32)]) -> Result<Vec<Vec<u64>>, VmmError> {
        let shape = self.shape;
        let ranges = merge_adjacent(
            vms.iter()
                .map(|&(vm, words)| PerVmArray::RET.bytes(&shape, vm, 0, words as u64)),
        );
        let total: u64 = vms.iter().map(|&(_, w)| w as u64 * 8).sum();
        let mut bytes = vec![0u8; total as usize];
        if total > 0 {
            self.timed(|s| s.device.read(FleetBuffer::Ret, &ranges, &mut bytes))?;
        }
        let mut words = bytes
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().unwrap_or_default()));
        Ok(vms
            .iter()
            .map(|&(_, w)| words.by_ref().take(w as usize).collect())
            .collect())
    }

    /// Writes `values` as the first result words of each VM (ascending), in one transfer.
    pub fn write_results(&mut self, values: &[(u32, Vec<u64>)]) -> Result<(), VmmError> {
        let shape = self.shape;
        let ranges = merge_adjacent(
            values
                .iter()
                .map(|(vm, v)| PerVmArray::RET.bytes(&shape, *vm, 0, v.len() as u64)),
        );
        let bytes: Vec<u8> = values
            .iter()
            .flat_map(|(_, v)| v.iter().flat_map(|w| w.to_le_bytes()))
            .collect();
        if bytes.is_empty() {
            return Ok(());
        }
        self.timed(|s| s.device.write(FleetBuffer::Ret, &ranges, &bytes))?;
        Ok(())
    }

    /// Writes the instantiation image.
    pub fn write_image(&mut self, words: &[u64]) -> Result<(), VmmError> {
        let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        self.timed(|s| {
            s.device.write(
                FleetBuffer::Image,
                std::slice::from_ref(&(0..bytes.len() as u64)),
                &bytes,
            )
        })?;
        Ok(())
    }

    /// Reads the byte ranges `ranges` of `buffer` (globals, table sizes, memory).
    pub fn read_bytes(
        &mut self,
        buffer: FleetBuffer,
        ranges: &[std::ops::Range<u64>],
    ) -> Result<Vec<u8>, VmmError> {
        let total: u64 = ranges.iter().map(|r| r.end.saturating_sub(r.start)).sum();
        let mut out = vec![0u8; total as usize];
        self.timed(|s| s.device.read(buffer, ranges, &mut out))?;
        Ok(out)
    }
}
