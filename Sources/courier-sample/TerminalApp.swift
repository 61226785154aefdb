import CourierKit
import CourierLog
import CourierSample
import Foundation

/// The terminal view, on the main actor: keys (read on a thread of their own, which blocks in
/// `read()` up to 100 ms at a time) go to the screen's input model, messages come from a
/// `CourierModel`, and the screen is redrawn after each read (at least every 100 ms, so
/// countdowns move and resizes show). All logic is in `SampleViewModel`, `CourierModel` and
/// `ScreenRenderer`; this only moves bytes.
@MainActor
final class TerminalApp {
    private let courier: Courier
    private let model: CourierModel
    private var screen: SampleViewModel
    private let terminal = Terminal()
    private let logDirectory: String
    private let serverDescription: String
    private let launchedAt = Date()

    /// Lists the pending messages and follows every change after them (`CourierModel`).
    init(courier: Courier, server: URL, logDirectory: String, serverDescription: String) {
        self.courier = courier
        model = CourierModel(courier: courier, keepingBodies: true)  // the rows show what was sent
        screen = SampleViewModel(server: server)
        self.logDirectory = logDirectory
        self.serverDescription = serverDescription
    }

    func run() async {
        let stop = Locked(false)
        // SIGTERM/SIGHUP: leave the loop and restore the terminal like a normal quit.
        let signalSources = [SIGTERM, SIGHUP].map { number -> DispatchSourceSignal in
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler { stop.withLock { $0 = true } }
            source.resume()
            return source
        }
        defer { signalSources.forEach { $0.cancel() } }
        // Raw mode first: a read() begun in canonical mode would block until a newline, and the
        // screen would stay blank (the smoke test caught it, once, on a busy machine).
        terminal.enterRawMode()
        let (reads, input) = AsyncStream.makeStream(of: [UInt8].self)
        Thread {
            // Bounded by the user: until the screen says quit (or a signal came).
            while !stop.withLock({ $0 }) { input.yield(Terminal.readBytes()) }
            input.finish()
        }.start()
        var decoder = KeyDecoder()
        for await bytes in reads {
            if handle(decoder.decode(bytes)) { stop.withLock { $0 = true } }
            draw()
        }
        terminal.restore()
        await courier.close()
    }

    /// True when a key says quit.
    private func handle(_ keys: [SampleViewModel.Key]) -> Bool {
        for key in keys {
            switch screen.handle(key) {
            case .none: break
            case .quit: return true
            case .send(let text):
                do { _ = try model.send(["text": text], to: screen.server) } catch { screen.sendFailed("\(error)") }
            }
        }
        return false
    }

    private func draw() {
        let size = terminal.size
        let renderer = ScreenRenderer(
            width: size.width, height: size.height, styled: true, logDirectory: logDirectory,
            serverDescription: serverDescription)
        let rows = model.messages.reversed().map { MessageRow($0, launchedAt: launchedAt) }
        terminal.draw(
            renderer.lines(
                for: screen, rows: rows, serverStatus: MessageRow.serverStatus(model.destinations),
                pendingCount: model.pendingCount, now: Date()))
    }
}
