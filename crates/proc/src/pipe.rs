//! A child's output pipes, read on threads of their own.

use std::io::Read;
use std::time::Duration;

use tokio::sync::mpsc;

/// One read from a pipe, with the tag of the pipe it came from; `None` is
/// the end of that pipe.
pub type Chunk<T> = (T, Option<Vec<u8>>);

/// Most bytes in one [`Chunk`].
pub const READ_BYTES: usize = 64 * 1024;

/// How long output may gather in a pipe after a small read.
const GATHER: Duration = Duration::from_millis(2);

/// Reads `pipe` (a pipe's read end, a child's stdout) on a thread of its
/// own, sending what it reads to `chunks` tagged with `tag`, in the order
/// read, then `(tag, None)` at its end. Give every pipe of a child a clone
/// of one sender and a tag of its own to receive their output interleaved
/// as it was read.
///
/// Why a thread with plain blocking reads rather than the async reactor: a
/// pipe someone polls wakes its poller on *every* write, and a program
/// printing a million short lines then spends most of its time waking its
/// reader. A blocked reader is woken only by a write to an empty pipe;
/// after a small read the thread lets output gather for a couple of
/// milliseconds before reading again, so a flood of lines becomes a few
/// large chunks at the cost of at most that much latency; a full read is
/// followed by the next at once.
///
/// The thread ends at the end of the stream (every process holding the
/// pipe's write end has closed it or died; a read error counts as the end)
/// or when nobody takes chunks any more. So the caller must close its own
/// copies of the write end (e.g. drop the `Command` that was given it)
/// before it can see the end.
///
/// # Errors
///
/// When the thread cannot be started; then nothing at all, not even the
/// end, is sent for this pipe.
pub fn read_pipe<T: Copy + Send + 'static>(
    mut pipe: impl Read + Send + 'static,
    tag: T,
    chunks: mpsc::Sender<Chunk<T>>,
) -> std::io::Result<()> {
    let reader = move || {
        let mut buf = vec![0; READ_BYTES];
        loop {
            let n = match pipe.read(&mut buf) {
                Ok(n) => n,
                Err(error) if error.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => 0,
            };
            if n == 0 {
                let _ = chunks.blocking_send((tag, None));
                return;
            }
            if chunks
                .blocking_send((tag, Some(buf[..n].to_vec())))
                .is_err()
            {
                return;
            }
            if n < READ_BYTES / 2 {
                std::thread::sleep(GATHER);
            }
        }
    };
    std::thread::Builder::new()
        .name("weir-pipe".into())
        .spawn(reader)
        .map(drop)
}

#[cfg(test)]
mod tests {
    use std::io::Write as _;

    use super::*;

    #[test]
    fn a_pipe_is_read_in_order_to_its_end_in_chunks_of_bounded_size() {
        let (reader, mut writer) = std::io::pipe().unwrap();
        let (sender, mut chunks) = mpsc::channel(4);
        read_pipe(reader, 'o', sender).unwrap();
        let lines: Vec<u8> = (0..100_000)
            .flat_map(|i| format!("{i}\n").into_bytes())
            .collect();
        let written = lines.clone();
        let writing = std::thread::spawn(move || {
            for line in written.split_inclusive(|&b| b == b'\n') {
                writer.write_all(line).unwrap();
            }
        });
        let mut read = Vec::new();
        let mut count = 0;
        loop {
            match chunks.blocking_recv() {
                Some(('o', Some(bytes))) => {
                    assert!(bytes.len() <= READ_BYTES);
                    read.extend(bytes);
                    count += 1;
                }
                Some(('o', None)) => break,
                other => panic!("unexpected {other:?}"),
            }
        }
        writing.join().unwrap();
        assert_eq!(read, lines);
        // 100,000 writes, read as far fewer chunks.
        assert!(count < 10_000, "{count} chunks");
        assert_eq!(chunks.blocking_recv(), None);
    }
}
