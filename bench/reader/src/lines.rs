//! A read buffer that hands out complete lines without copying them.

use std::io::{self, Read};

/// Bytes read and not yet consumed: `data[start..end]`.
pub struct Buffer {
    data: Vec<u8>,
    start: usize,
    end: usize,
}

/// What one read asks for: as much as the kernel has (a 1 MiB pipe, a
/// socket's receive queue), so a burst costs few system calls.
const READ_SIZE: usize = 1 << 20;

impl Buffer {
    pub fn new() -> Buffer {
        Buffer {
            data: vec![0; READ_SIZE],
            start: 0,
            end: 0,
        }
    }

    /// What is buffered.
    pub fn available(&self) -> &[u8] {
        &self.data[self.start..self.end]
    }

    /// Drops the first `n` buffered bytes.
    pub fn consume(&mut self, n: usize) {
        debug_assert!(n <= self.end - self.start);
        self.start += n;
    }

    /// The next complete line, without its `\n`, consumed.
    pub fn next_line(&mut self) -> Option<&[u8]> {
        let newline = memchr::memchr(b'\n', self.available())?;
        let line = self.start..self.start + newline;
        self.start += newline + 1;
        Some(&self.data[line])
    }

    /// Reads once more from `reader`, making room first (moving what is
    /// left to the front, or growing for a line longer than the buffer).
    /// Returns how many bytes came: 0 at the end of the input.
    pub fn fill(&mut self, reader: &mut impl Read) -> io::Result<usize> {
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        } else if self.end == self.data.len() {
            if self.start > 0 {
                self.data.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
            } else {
                self.data.resize(self.data.len() * 2, 0);
            }
        }
        loop {
            match reader.read(&mut self.data[self.end..]) {
                Ok(n) => {
                    self.end += n;
                    return Ok(n);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Buffer;

    /// Lines split across reads, and one longer than the buffer.
    #[test]
    fn lines_come_whole() {
        let long = "y".repeat((1 << 20) + 10);
        let input = format!("a\nbc\n{long}\nd");
        let mut reader = input.as_bytes();
        let mut buffer = Buffer::new();
        let mut got = Vec::new();
        loop {
            while let Some(line) = buffer.next_line() {
                got.push(String::from_utf8(line.to_vec()).unwrap());
            }
            if buffer.fill(&mut reader).unwrap() == 0 {
                break;
            }
        }
        assert_eq!(got, ["a", "bc", long.as_str()]);
        assert_eq!(buffer.available(), b"d");
    }
}
