#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The raw terminal: no echo, no line buffering, keys byte by byte, drawn on the alternate
/// screen; everything restored by `restore()`.
final class Terminal {
    private var original = termios()
    private var active = false

    static var isInteractive: Bool { isatty(STDIN_FILENO) == 1 && isatty(STDOUT_FILENO) == 1 }

    func enterRawMode() {
        tcgetattr(STDIN_FILENO, &original)
        var raw = original
        raw.c_lflag &= ~tcflag_t(ECHO | ICANON | ISIG | IEXTEN)
        raw.c_iflag &= ~tcflag_t(IXON | ICRNL | BRKINT | INPCK | ISTRIP)
        raw.c_oflag &= ~tcflag_t(OPOST)
        // read() returns after at most 100 ms with whatever arrived (maybe nothing).
        withUnsafeMutableBytes(of: &raw.c_cc) { cc in
            cc[Int(VMIN)] = 0
            cc[Int(VTIME)] = 1
        }
        tcsetattr(STDIN_FILENO, TCSAFLUSH, &raw)
        write("\u{1B}[?1049h\u{1B}[?25l")  // alternate screen, hide cursor
        active = true
    }

    func restore() {
        guard active else { return }
        active = false
        write("\u{1B}[?25h\u{1B}[?1049l")
        tcsetattr(STDIN_FILENO, TCSAFLUSH, &original)
    }

    /// Columns and rows.
    var size: (width: Int, height: Int) {
        var ws = winsize()
        guard ioctl(STDOUT_FILENO, UInt(TIOCGWINSZ), &ws) == 0, ws.ws_col > 0 else { return (80, 24) }
        return (Int(ws.ws_col), Int(ws.ws_row))
    }

    /// Bytes typed since the last call; waits at most 100 ms.
    static func readBytes() -> [UInt8] {
        var buffer = [UInt8](repeating: 0, count: 64)
        let n = buffer.withUnsafeMutableBytes { read(STDIN_FILENO, $0.baseAddress, $0.count) }
        return n > 0 ? Array(buffer.prefix(n)) : []
    }

    /// Redraws the whole screen: home, each line cleared to its end.
    func draw(_ lines: [String]) {
        var frame = "\u{1B}[H"
        for (i, line) in lines.enumerated() {
            frame += line + "\u{1B}[K" + (i < lines.count - 1 ? "\r\n" : "")
        }
        write(frame + "\u{1B}[J")
    }

    func write(_ s: String) {
        var bytes = Array(s.utf8)
        var done = 0
        while done < bytes.count {
            let n = bytes.withUnsafeMutableBytes { systemWrite(STDOUT_FILENO, $0.baseAddress! + done, $0.count - done) }
            if n <= 0 { return }
            done += n
        }
    }
}

#if canImport(Glibc)
let systemWrite = Glibc.write
#else
let systemWrite = Darwin.write
#endif
