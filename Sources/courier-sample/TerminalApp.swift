import CourierKit
import CourierSample
import Foundation

/// The terminal view: feeds keys and library events to the view model, redraws. All logic is
/// in `SampleViewModel`; this only moves bytes.
final class TerminalApp: @unchecked Sendable {
    private let gateway: any SampleGateway
    private let lock = NSLock()
    private var model: SampleViewModel  // guarded by `lock`
    private let terminal = Terminal()
    private let logDirectory: String
    private let serverDescription: String

    private let events: AsyncStream<CourierEvent>

    /// Lists the pending messages and follows every event after them.
    init(gateway: any SampleGateway, server: URL, logDirectory: String, serverDescription: String) async {
        self.gateway = gateway
        let (pending, events) = await gateway.pendingMessagesAndEvents()
        self.model = SampleViewModel(pending: pending, server: server)
        self.events = events
        self.logDirectory = logDirectory
        self.serverDescription = serverDescription
    }

    /// Set by SIGTERM/SIGHUP: leave the loop and restore the terminal like a normal quit.
    private var terminationRequested = false  // guarded by `lock`

    func run() async {
        let signalSources = [SIGTERM, SIGHUP].map { number -> DispatchSourceSignal in
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler { [weak self] in self?.lock.withLock { self?.terminationRequested = true } }
            source.resume()
            return source
        }
        defer { signalSources.forEach { $0.cancel() } }
        let events = self.events
        let listener = Task {
            for await event in events {
                lock.withLock { model.apply(event, at: Date()) }
            }
        }
        terminal.enterRawMode()
        // The input loop blocks in read() for up to 100 ms at a time: give it its own thread.
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            Thread { [self] in
                inputLoop()
                done.resume()
            }.start()
        }
        terminal.restore()
        await gateway.close()
        listener.cancel()
    }

    /// Reads keys and redraws (every 100 ms at least, so countdowns move and resizes show),
    /// until the model says quit. Bounded by the user.
    private func inputLoop() {
        var decoder = KeyDecoder()
        while true {
            let keys = decoder.decode(terminal.readBytes())
            var quit = false
            for key in keys {
                let command = lock.withLock { model.handle(key) }
                switch command {
                case .none: break
                case .quit: quit = true
                case .send(let text): send(text)
                }
            }
            if quit || lock.withLock({ terminationRequested }) { return }
            let size = terminal.size
            let renderer = ScreenRenderer(
                width: size.width, height: size.height, styled: true,
                logDirectory: logDirectory, serverDescription: serverDescription)
            terminal.draw(lock.withLock { renderer.lines(for: model, now: Date()) })
        }
    }

    private func send(_ text: String) {
        do {
            let id = try gateway.send(text: text, to: model.server)
            lock.withLock { model.didSend(id, text: text, at: Date()) }
        } catch {
            lock.withLock { model.sendFailed("\(error)") }
        }
    }
}
