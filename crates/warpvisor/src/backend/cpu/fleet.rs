//! A fleet's storage for the `cpu` backend: one zeroed host allocation per buffer, which the
//! kernel reads and writes in place. "Transfers" are copies between the VMM's host-side
//! values and these buffers, counted like any backend's.

use std::any::Any;
use std::ops::Range;

use crate::abi::{FleetAbi, FleetBuffer, FleetShape};
use crate::backend::{check_ranges, BackendError, DeviceFleet, Traffic, ZeroedBytes};

/// The buffers of one fleet in host memory.
pub struct CpuFleet {
    shape: FleetShape,
    buffers: Vec<ZeroedBytes>,
    traffic: Traffic,
}

impl CpuFleet {
    /// Allocates every buffer of `shape`, zeroed (untouched pages never become resident), and
    /// copies in the segment blobs.
    pub fn new(
        shape: &FleetShape,
        data_blob: &[u8],
        elem_blob: &[u32],
    ) -> Result<Self, BackendError> {
        let mut buffers = Vec::with_capacity(FleetBuffer::ALL.len());
        for &b in FleetBuffer::ALL {
            let bytes = usize::try_from(shape.bytes(b)).map_err(|_| BackendError::OutOfMemory {
                bytes: shape.bytes(b),
            })?;
            buffers.push(ZeroedBytes::new(bytes)?);
        }
        let mut fleet = CpuFleet {
            shape: *shape,
            buffers,
            traffic: Traffic::default(),
        };
        fleet.fill(FleetBuffer::DataBlob, data_blob)?;
        let elems: Vec<u8> = elem_blob.iter().flat_map(|r| r.to_le_bytes()).collect();
        fleet.fill(FleetBuffer::ElemBlob, &elems)?;
        Ok(fleet)
    }

    /// Copies `bytes` to the start of `buffer` (not counted as traffic: it is creation).
    fn fill(&mut self, buffer: FleetBuffer, bytes: &[u8]) -> Result<(), BackendError> {
        let dst = self.buffers[Self::slot(buffer)].as_mut_slice();
        dst.get_mut(..bytes.len())
            .ok_or_else(|| {
                BackendError::Launch(format!("the {} blob does not fit", buffer.name()))
            })?
            .copy_from_slice(bytes);
        Ok(())
    }

    fn slot(buffer: FleetBuffer) -> usize {
        FleetBuffer::ALL
            .iter()
            .position(|b| *b == buffer)
            .unwrap_or(0)
    }

    /// The kernel's view of the buffers. Valid while `self` lives.
    pub fn abi(&mut self) -> FleetAbi {
        let bases: Vec<*mut u8> = self.buffers.iter_mut().map(|b| b.as_mut_ptr()).collect();
        FleetAbi::new(|b| bases[Self::slot(b)], &self.shape.scalars())
    }
}

impl DeviceFleet for CpuFleet {
    fn shape(&self) -> &FleetShape {
        &self.shape
    }

    fn read(
        &mut self,
        buffer: FleetBuffer,
        ranges: &[Range<u64>],
        out: &mut [u8],
    ) -> Result<(), BackendError> {
        check_ranges(&self.shape, buffer, ranges, out.len())?;
        let src = self.buffers[Self::slot(buffer)].as_slice();
        let mut at = 0;
        for r in ranges {
            let n = (r.end - r.start) as usize;
            out[at..at + n].copy_from_slice(&src[r.start as usize..r.end as usize]);
            at += n;
        }
        self.traffic.from_device += out.len() as u64;
        self.traffic.transfers += 1;
        Ok(())
    }

    fn write(
        &mut self,
        buffer: FleetBuffer,
        ranges: &[Range<u64>],
        data: &[u8],
    ) -> Result<(), BackendError> {
        check_ranges(&self.shape, buffer, ranges, data.len())?;
        let dst = self.buffers[Self::slot(buffer)].as_mut_slice();
        let mut at = 0;
        for r in ranges {
            let n = (r.end - r.start) as usize;
            dst[r.start as usize..r.end as usize].copy_from_slice(&data[at..at + n]);
            at += n;
        }
        self.traffic.to_device += data.len() as u64;
        self.traffic.transfers += 1;
        Ok(())
    }

    fn traffic(&self) -> Traffic {
        self.traffic
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}
