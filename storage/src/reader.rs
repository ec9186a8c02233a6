//! Reading records back in zxid order across segments: recovery replay after
//! a snapshot, and (later) the records a ZAB leader sends in a DIFF.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{BufReader, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use crate::error::{CorruptReason, IoContext, Result};
use crate::fsutil::ZxidFile;
use crate::recovery::{corrupt, list_segments};
use crate::segment::{
    open_segment, Frame, HeaderState, OpenSegment, RecordReader, FILE_HEADER_LEN,
};
use crate::Zxid;

/// One log record: its zxid and the opaque body appended with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogRecord {
    /// The record's zxid.
    pub zxid: Zxid,
    /// The body, byte for byte as appended.
    pub body: Vec<u8>,
}

/// Iterator over the records with `from_zxid < zxid <= up_to_zxid`, in zxid
/// order, across segments.
///
/// Every segment it may need is opened when the iterator is created, so a
/// concurrent purge (which unlinks old segments) does not pull files from
/// under it. Every record read is CRC-checked; a bad one ends the iteration
/// with [`crate::StorageError::Corrupt`]. After an error the iterator yields
/// nothing more.
pub struct LogIter {
    pending: VecDeque<(PathBuf, OpenSegment)>,
    current: Option<(PathBuf, RecordReader<BufReader<File>>)>,
    from_zxid: u64,
    up_to_zxid: u64,
    prev_zxid: u64,
    done: bool,
}

/// Reads the records of the log in `dir` with `from_zxid < zxid <= up_to_zxid`.
///
/// Meant for reading while another thread appends (a ZAB leader serving a
/// DIFF while a [`crate::GroupCommitLog`] writes): pass a zxid known to be
/// durable as `up_to_zxid`, so that the reader stops before the records still
/// being written. Records are expected to be complete up to `up_to_zxid`; a
/// partial record before it is reported as corruption.
pub fn read_log(dir: &Path, from_zxid: Zxid, up_to_zxid: Zxid) -> Result<LogIter> {
    LogIter::over(&list_segments(dir)?, from_zxid.0, up_to_zxid.0)
}

impl LogIter {
    /// Opens the segments among `segments` (sorted by first zxid) that may
    /// hold records in `(from_zxid, up_to_zxid]`.
    pub(crate) fn over(segments: &[ZxidFile], from_zxid: u64, up_to_zxid: u64) -> Result<Self> {
        let mut pending = VecDeque::new();
        if from_zxid < up_to_zxid {
            for (i, seg) in segments.iter().enumerate() {
                let next_first = segments.get(i + 1).map(|n| n.zxid);
                if may_hold(seg.zxid, next_first, from_zxid, up_to_zxid) {
                    pending.push_back((seg.path.clone(), open_for_reading(&seg.path)?));
                }
            }
        }
        Ok(Self {
            pending,
            current: None,
            from_zxid,
            up_to_zxid,
            prev_zxid: 0,
            done: false,
        })
    }

    fn advance(&mut self) -> Result<Option<LogRecord>> {
        loop {
            if self.current.is_none() && !self.open_next()? {
                return Ok(None);
            }
            let Some((path, reader)) = self.current.as_mut() else {
                return Ok(None);
            };
            match reader.next_frame().at(path)? {
                Frame::Record { offset, zxid } => {
                    if zxid <= self.prev_zxid {
                        let reason = CorruptReason::ZxidNotIncreasing {
                            previous: self.prev_zxid,
                            found: zxid,
                        };
                        return Err(corrupt(path, offset, Some(zxid), reason));
                    }
                    self.prev_zxid = zxid;
                    if zxid > self.up_to_zxid {
                        return Ok(None);
                    }
                    self.done = zxid == self.up_to_zxid;
                    if zxid > self.from_zxid {
                        let body = reader.take_body();
                        return Ok(Some(LogRecord {
                            zxid: Zxid(zxid),
                            body,
                        }));
                    }
                    if self.done {
                        return Ok(None);
                    }
                }
                Frame::End | Frame::ZeroFill { .. } => self.current = None,
                Frame::Bad {
                    offset,
                    zxid,
                    reason,
                } => return Err(corrupt(path, offset, zxid, reason)),
            }
        }
    }

    /// Starts reading the next pending segment; false when none is left.
    fn open_next(&mut self) -> Result<bool> {
        let Some((path, seg)) = self.pending.pop_front() else {
            return Ok(false);
        };
        let mut file = seg.file;
        file.seek(SeekFrom::Start(FILE_HEADER_LEN)).at(&path)?;
        let reader = RecordReader::new(BufReader::new(file), FILE_HEADER_LEN, seg.len);
        self.current = Some((path, reader));
        Ok(true)
    }
}

impl Iterator for LogIter {
    type Item = Result<LogRecord>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let step = self.advance();
        if !matches!(step, Ok(Some(_))) {
            self.done = true;
        }
        step.transpose()
    }
}

/// Whether a segment starting at `first`, followed by one starting at
/// `next_first`, may hold a record in `(from, up_to]`. Records of a segment
/// lie in `[first, next_first)`.
fn may_hold(first: u64, next_first: Option<u64>, from: u64, up_to: u64) -> bool {
    let starts_in_time = first <= up_to;
    let reaches_past_from = next_first.is_none_or(|next| next > from.saturating_add(1));
    starts_in_time && reaches_past_from
}

/// Opens a segment for reading, requiring a valid header.
fn open_for_reading(path: &Path) -> Result<OpenSegment> {
    let seg = open_segment(path)?;
    match &seg.header {
        HeaderState::Valid => Ok(seg),
        HeaderState::Invalid(problem) => Err(problem.clone().into_error(path)),
    }
}

#[cfg(test)]
mod tests {
    use super::may_hold;

    #[test]
    fn segment_selection_skips_segments_entirely_at_or_below_from() {
        // Segment [1, 10) when reading after 9: everything in it is <= 9.
        assert!(!may_hold(1, Some(10), 9, 100));
        // Reading after 8: zxid 9 may be in it.
        assert!(may_hold(1, Some(10), 8, 100));
        // The last segment is always a candidate if it starts in time.
        assert!(may_hold(10, None, 50, 100));
        // A segment starting after up_to is never needed.
        assert!(!may_hold(101, None, 50, 100));
        assert!(!may_hold(1, Some(u64::MAX), u64::MAX, u64::MAX));
    }
}
