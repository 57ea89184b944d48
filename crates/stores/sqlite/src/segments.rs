//! Where a row of several events keeps its bytes (schema 9): segment files
//! beside the database, each written once, front to back, and deleted
//! whole when no row points into it any more.
//!
//! Why not in the database: SQLite writes every byte of a row twice, to the
//! write-ahead log and again when the checkpoint copies it into the
//! database file, and reads it once in between. Streaming 1 KB items, that
//! was most of the server's CPU (`perf`: the writer's WAL frames, the
//! checkpoint's reads, writes and syncs); written once to a segment file,
//! the server spent 2.0–2.1 µs of CPU per item instead of 3.6–3.8, the
//! memory store 1.65 (`bench/reader`, 20,000 × 1 KB over stdio).
//!
//! How it stays safe: the bytes are written before the transaction that
//! stores the row pointing at them commits, so a row a reader sees always
//! has its bytes (a process that dies before its commit leaves bytes no
//! row points at, wasted until their segment goes). The newest segment is
//! the `segments` table's last, and the next bytes go at its file's end,
//! both read inside the writer's transaction, which holds the database's
//! write lock from its start, so several processes writing one log take
//! turns. With [`Durability::PowerLoss`] the segment is synced before the
//! commit; with the default, as with SQLite's own `synchronous=NORMAL`, a
//! power loss may cost the last appends, and each row keeps a hash of its
//! bytes, so bytes that did not reach the disk are reported as unreadable
//! rather than misread.
//!
//! [`Durability::PowerLoss`]: crate::Durability::PowerLoss

use std::fs::File;
use std::io;
use std::os::unix::fs::{DirBuilderExt as _, FileExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};

use rusqlite::Connection;
use weir_runtime::LogError;

use crate::Durability;
use crate::connection::db;

/// The form byte of a row's body that points into a segment: the bytes'
/// offset (8 bytes, little-endian), their length (4) and their hash (8).
/// The segment is the row's `segment` column.
pub(crate) const POINTER: u8 = 3;

/// The segment files of the log at `db`, in `<db>-segments/`.
#[derive(Clone)]
pub(crate) struct Segments {
    dir: PathBuf,
}

impl Segments {
    pub(crate) fn beside(db: &Path) -> Segments {
        Segments {
            dir: PathBuf::from(format!("{}-segments", db.display())),
        }
    }

    fn path(&self, id: i64) -> PathBuf {
        self.dir.join(format!("{id:010}"))
    }

    fn failed(&self, doing: &'static str, id: i64) -> impl FnOnce(io::Error) -> LogError {
        let path = self.path(id);
        move |error| LogError::Storage {
            doing,
            message: format!("{}: {error}", path.display()),
        }
    }

    /// A reader of rows' bytes, for one read of the log.
    pub(crate) fn reader(&self) -> SegmentReader<'_> {
        SegmentReader {
            segments: self,
            open: None,
            buffer: Vec::new(),
        }
    }

    /// Deletes the files of segments no row points into any more (their
    /// rows are gone from the `segments` table, committed).
    pub(crate) fn remove(&self, ids: &[i64]) {
        for &id in ids {
            match std::fs::remove_file(self.path(id)) {
                Ok(()) => {}
                Err(error) if error.kind() == io::ErrorKind::NotFound => {}
                Err(error) => tracing::warn!(segment = id, %error, "could not delete a segment"),
            }
        }
    }

    /// Deletes the files of segments the table no longer has: a process
    /// that stopped between deleting old runs and deleting their files.
    /// Only below the newest segment: a file above it may be one another
    /// process is creating in its open transaction.
    pub(crate) fn remove_orphans(&self, conn: &Connection) -> Result<(), LogError> {
        let doing = "reading the segments";
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return Ok(());
        };
        let ids: Vec<i64> = conn
            .prepare("SELECT id FROM segments ORDER BY id")
            .and_then(|mut stmt| stmt.query_map([], |row| row.get(0))?.collect())
            .map_err(db(doing))?;
        let Some(&newest) = ids.last() else {
            return Ok(());
        };
        let orphans: Vec<i64> = entries
            .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse().ok())
            .filter(|id| *id < newest && ids.binary_search(id).is_err())
            .collect();
        self.remove(&orphans);
        Ok(())
    }

    /// Segments no row points into, except the newest (appends go on
    /// there): their table rows are deleted in `conn`'s transaction; the
    /// caller deletes their files once it has committed.
    pub(crate) fn unused(conn: &Connection) -> Result<Vec<i64>, LogError> {
        let doing = "deleting unused segments";
        let unused: Vec<i64> = conn
            .prepare_cached(
                "SELECT id FROM segments s WHERE id < (SELECT max(id) FROM segments)
                 AND NOT EXISTS (SELECT 1 FROM events WHERE segment = s.id)",
            )
            .and_then(|mut stmt| stmt.query_map([], |row| row.get(0))?.collect())
            .map_err(db(doing))?;
        for id in &unused {
            conn.execute("DELETE FROM segments WHERE id = ?1", [id])
                .map_err(db(doing))?;
        }
        Ok(unused)
    }
}

/// Reads rows' bytes for one read of the log: keeps the segment it last
/// read open and its buffer, as consecutive rows are mostly in one segment.
pub(crate) struct SegmentReader<'a> {
    segments: &'a Segments,
    open: Option<(i64, File)>,
    buffer: Vec<u8>,
}

impl SegmentReader<'_> {
    /// The bytes a row's `pointer` (its body) points at in segment `id`.
    pub(crate) fn read(&mut self, id: i64, pointer: &[u8]) -> Result<&[u8], String> {
        let Some((offset, len, hash)) = decode_pointer(pointer) else {
            return Err("a damaged pointer into a segment".into());
        };
        let path = || self.segments.path(id);
        if self.open.as_ref().is_none_or(|(open, _)| *open != id) {
            let file =
                File::open(path()).map_err(|error| format!("{}: {error}", path().display()))?;
            self.open = Some((id, file));
        }
        let (_, file) = self.open.as_ref().expect("opened above");
        // Grown, and so zeroed, only past the largest row read so far.
        if self.buffer.len() < len {
            self.buffer.resize(len, 0);
        }
        let bytes = &mut self.buffer[..len];
        file.read_exact_at(bytes, offset)
            .map_err(|error| format!("{}: {error}", path().display()))?;
        if xxhash_rust::xxh3::xxh3_64(bytes) != hash {
            return Err(format!(
                "{len} bytes at {offset} of {} do not hold what was written there (lost in a power loss?)",
                path().display()
            ));
        }
        Ok(bytes)
    }
}

/// The writer's side: appends rows' bytes to the newest segment.
pub(crate) struct Appender {
    segments: Segments,
    durability: Durability,
    /// A segment's size before the next row starts a new one (a row never
    /// spans two): `SqliteOptions::segment_bytes`.
    segment_bytes: u64,
    /// The segment being written, kept open between transactions.
    file: Option<(i64, File)>,
    /// Where the next bytes go, as read in this transaction; `None` until
    /// the transaction's first row (another process may have written since
    /// the last one).
    next: Option<(i64, u64)>,
    /// Whether this transaction wrote bytes the disk may not have yet.
    wrote: bool,
    /// Rows' bytes not yet written, to go at `(id, offset)` of
    /// [`Appender::unwritten_at`]: a transaction's rows are written with
    /// one system call before it commits, not one each (a 32 KiB row per
    /// call cost the kernel 0.24 µs a KB, 512 KiB a call 0.17).
    unwritten: Vec<u8>,
    unwritten_at: (i64, u64),
    /// Why held-back bytes could not be written in this transaction: rows
    /// of operations already applied may point at them, so the whole
    /// transaction must not commit.
    unwritable: Option<String>,
    /// The segment, and where in it, up to which blocks have been asked of
    /// the filesystem ahead of the bytes ([`RESERVE_BYTES`]).
    reserved: Option<(i64, u64)>,
}

/// Unwritten bytes past which a row is written at once.
const MOST_UNWRITTEN: usize = 1 << 20;

/// How far past the bytes being written the appender asks the filesystem
/// for blocks (`fallocate`, the file's size unchanged), up to the segment's
/// size. Why: writing past a file's end into blocks not yet allocated, ext4
/// reserves and tracks every block as it goes (delayed allocation); into
/// blocks already allocated it only copies. Streaming 1 KB items that was
/// a fifth of the kernel's time writing a segment, and a tenth of the
/// machine's counting the later writeback (a 256 MiB file in 48 KiB
/// writes: 0.33–0.38 µs of the writer's CPU a KB against 0.40–0.47, the
/// machine's 0.53–0.57 against 0.61–0.65). A filesystem that cannot is
/// written as before; at most one row's room a segment goes unused, as a
/// segment is full at `segment_bytes`.
const RESERVE_BYTES: u64 = 4 << 20;

impl Appender {
    pub(crate) fn new(segments: Segments, durability: Durability, segment_bytes: u64) -> Appender {
        Appender {
            segments,
            durability,
            segment_bytes,
            file: None,
            next: None,
            wrote: false,
            unwritten: Vec::new(),
            unwritten_at: (0, 0),
            unwritable: None,
            reserved: None,
        }
    }

    pub(crate) fn segments(&self) -> &Segments {
        &self.segments
    }

    /// Forgets where the next bytes go: called as each transaction begins.
    pub(crate) fn begin(&mut self) {
        self.next = None;
        self.wrote = false;
        self.unwritten.clear();
        self.unwritable = None;
    }

    /// Forgets where the next bytes go after a savepoint was rolled back:
    /// it may have taken back the segment this append started, and the
    /// next row reads the newest again.
    pub(crate) fn rolled_back(&mut self) {
        // The file's end is read again, and what the transaction's earlier
        // operations wrote must be part of it (the rolled-back operation's
        // own bytes, which no row points at, harm nothing). A failure here
        // is kept for `finish`.
        let _ = self.write_out();
        self.next = None;
    }

    /// Writes `bytes` to the newest segment (starting one when they do not
    /// fit) and returns the row's segment and its body pointing at them.
    pub(crate) fn write(
        &mut self,
        conn: &Connection,
        bytes: &[u8],
    ) -> Result<(i64, [u8; 21]), LogError> {
        let doing = "appending to a segment";
        let (mut id, mut offset) = match self.next {
            Some(next) => next,
            None => {
                let id = newest(conn)?;
                (id, self.end_of(id)?)
            }
        };
        if offset > 0 && offset + bytes.len() as u64 > self.segment_bytes {
            self.write_out()?;
            self.sync()?;
            id += 1;
            conn.prepare_cached("INSERT INTO segments (id) VALUES (?1)")
                .and_then(|mut stmt| stmt.execute([id]))
                .map_err(db(doing))?;
            // At its end, not its start: a file of that name may already
            // hold bytes (a writer's whose transaction was taken back).
            offset = self.end_of(id)?;
        }
        if self.unwritten.is_empty() {
            self.unwritten_at = (id, offset);
        }
        self.unwritten.extend_from_slice(bytes);
        if self.unwritten.len() >= MOST_UNWRITTEN {
            self.write_out()?;
        }
        self.next = Some((id, offset + bytes.len() as u64));
        self.wrote = true;
        let mut pointer = [0; 21];
        pointer[0] = POINTER;
        pointer[1..9].copy_from_slice(&offset.to_le_bytes());
        let len = u32::try_from(bytes.len()).expect("a row under 4 GiB");
        pointer[9..13].copy_from_slice(&len.to_le_bytes());
        pointer[13..].copy_from_slice(&xxhash_rust::xxh3::xxh3_64(bytes).to_le_bytes());
        Ok((id, pointer))
    }

    /// With [`Durability::PowerLoss`], syncs what this transaction wrote:
    /// called before it commits.
    pub(crate) fn finish(&mut self) -> Result<(), LogError> {
        self.write_out()?;
        self.sync()
    }

    /// Writes the rows' bytes held back so far to their segment. Once this
    /// has failed, it fails for the rest of the transaction.
    fn write_out(&mut self) -> Result<(), LogError> {
        let doing = "appending to a segment";
        if let Some(message) = &self.unwritable {
            let message = message.clone();
            return Err(LogError::Storage { doing, message });
        }
        if self.unwritten.is_empty() {
            return Ok(());
        }
        let (id, offset) = self.unwritten_at;
        let unwritten = std::mem::take(&mut self.unwritten);
        let reserve = self.reservation(id, offset, offset + unwritten.len() as u64);
        let written = match self.open(id) {
            Ok(file) => {
                reserve_blocks(file, reserve);
                match file.write_all_at(&unwritten, offset) {
                    Ok(()) => Ok(()),
                    Err(error) => Err(self.segments.failed(doing, id)(error)),
                }
            }
            Err(error) => Err(error),
        };
        // Its allocation is kept for the next transaction's rows.
        self.unwritten = unwritten;
        self.unwritten.clear();
        if let Err(LogError::Storage { message, .. }) = &written {
            self.unwritable = Some(message.clone());
        }
        written
    }

    /// The blocks to ask for, from and how many, before writing segment
    /// `id` from `offset` up to `end`: none while earlier reservations
    /// cover it.
    fn reservation(&mut self, id: i64, offset: u64, end: u64) -> Option<(u64, u64)> {
        let from = match self.reserved {
            Some((reserved, upto)) if reserved == id && end <= upto => return None,
            Some((reserved, upto)) if reserved == id => upto.max(offset),
            _ => offset,
        };
        let upto = end.max((end + RESERVE_BYTES).min(self.segment_bytes));
        self.reserved = Some((id, upto));
        Some((from, upto - from))
    }

    fn sync(&self) -> Result<(), LogError> {
        match (&self.file, self.durability) {
            (Some((id, file)), Durability::PowerLoss) if self.wrote => file
                .sync_data()
                .map_err(self.segments.failed("syncing a segment", *id)),
            _ => Ok(()),
        }
    }

    /// Where segment `id`'s file ends: where its next bytes go.
    fn end_of(&mut self, id: i64) -> Result<u64, LogError> {
        let metadata = self.open(id)?.metadata();
        let failed = self.segments.failed("appending to a segment", id);
        Ok(metadata.map_err(failed)?.len())
    }

    /// The segment `id`'s file, created (0600, in a 0700 folder) when new.
    fn open(&mut self, id: i64) -> Result<&File, LogError> {
        if self.file.as_ref().is_none_or(|(open, _)| *open != id) {
            let path = self.segments.path(id);
            let created = !path.exists();
            let file = std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(&self.segments.dir)
                .and_then(|()| {
                    std::fs::OpenOptions::new()
                        .create(true)
                        .truncate(false)
                        .write(true)
                        .mode(0o600)
                        .open(&path)
                })
                .map_err(self.segments.failed("opening a segment", id))?;
            if created && self.durability == Durability::PowerLoss {
                File::open(&self.segments.dir)
                    .and_then(|dir| dir.sync_all())
                    .map_err(self.segments.failed("syncing the segments folder", id))?;
            }
            self.file = Some((id, file));
        }
        Ok(&self.file.as_ref().expect("opened above").1)
    }
}

/// The newest segment; the first one when there is none.
fn newest(conn: &Connection) -> Result<i64, LogError> {
    let doing = "reading the newest segment";
    let newest: Option<i64> = conn
        .prepare_cached("SELECT max(id) FROM segments")
        .and_then(|mut stmt| stmt.query_row([], |row| row.get(0)))
        .map_err(db(doing))?;
    match newest {
        Some(id) => Ok(id),
        None => {
            conn.execute("INSERT INTO segments (id) VALUES (1)", [])
                .map_err(db(doing))?;
            Ok(1)
        }
    }
}

fn decode_pointer(pointer: &[u8]) -> Option<(u64, usize, u64)> {
    let [POINTER, rest @ ..] = pointer else {
        return None;
    };
    let (offset, rest) = rest.split_first_chunk::<8>()?;
    let (len, rest) = rest.split_first_chunk::<4>()?;
    let hash: &[u8; 8] = rest.try_into().ok()?;
    Some((
        u64::from_le_bytes(*offset),
        u32::from_le_bytes(*len) as usize,
        u64::from_le_bytes(*hash),
    ))
}

/// Asks the filesystem for the blocks of `reserve` (from, length) in
/// `file`, keeping its size. Only ever a saving: a filesystem that cannot,
/// or has no room (which the write then says), leaves the write as it was.
fn reserve_blocks(file: &File, reserve: Option<(u64, u64)>) {
    if let Some((from, len)) = reserve {
        let _ = rustix::fs::fallocate(file, rustix::fs::FallocateFlags::KEEP_SIZE, from, len);
    }
}
