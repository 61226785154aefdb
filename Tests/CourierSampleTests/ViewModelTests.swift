@_spi(CourierTesting) import CourierKit
import CourierSample
import CourierTesting
import Foundation
import Testing

let t0 = Date(timeIntervalSince1970: 1_763_740_800)
let server = URL(string: "http://127.0.0.1:18787/messages")!
let ids = SequentialMessageIDs()

@Suite struct ViewModelTests {
    func type(_ text: String, into model: inout SampleViewModel) {
        for c in text { _ = model.handle(.character(c)) }
    }

    @Test func typingFillsTheFieldAndBackspaceRemoves() {
        var m = SampleViewModel(server: server)
        type("helo", into: &m)
        _ = m.handle(.backspace)
        type("lo", into: &m)
        #expect(m.text == "hello")
    }

    @Test func theButtonIsEnabledOnlyWhenTheFieldHasText() {
        var m = SampleViewModel(server: server)
        #expect(!m.isSendEnabled)
        type("   ", into: &m)
        #expect(!m.isSendEnabled, "blanks are not a message")
        #expect(m.handle(.enter) == .none)
        type("x", into: &m)
        #expect(m.isSendEnabled)
    }

    @Test func tabReachesTheButtonAndEnterOrSpaceActivatesIt() {
        var m = SampleViewModel(server: server)
        type("hello", into: &m)
        _ = m.handle(.tab)
        #expect(m.focus == .sendButton)
        #expect(m.handle(.character("x")) == .none, "typing on the button does nothing")
        #expect(m.handle(.enter) == .send("hello"))
        #expect(m.text.isEmpty)
        _ = m.handle(.tab)
        type("again", into: &m)
        _ = m.handle(.tab)
        #expect(m.handle(.character(" ")) == .send("again"))
    }

    @Test func qQuitsOnlyWhenTheFieldIsNotFocusedAndCtrlCAlways() {
        var m = SampleViewModel(server: server)
        #expect(m.handle(.character("q")) == .none)
        #expect(m.text == "q", "q is just a letter in the field")
        _ = m.handle(.tab)
        #expect(m.handle(.character("q")) == .quit)
        var n = SampleViewModel(server: server)
        #expect(n.handle(.interrupt) == .quit)
    }

    @Test func rowsSayWhereEachMessageStands() {
        let id = ids.next()
        func row(_ state: MessageStatus.State, attempts: Int = 0, changedAt: Date? = nil) -> MessageRow {
            MessageRow(
                MessageStatus(
                    id: id, state: state, attempts: attempts, body: Data(#"{"text":"hello"}"#.utf8), sentAt: t0,
                    changedAt: changedAt), launchedAt: t0)
        }
        #expect(row(.queued).text == "hello" && !row(.queued).resumed)
        #expect(row(.queued).status(now: t0) == "queued")
        #expect(row(.sending(attempt: 1)).status(now: t0) == "sending (attempt 1)")
        let next = t0.addingTimeInterval(2.4)
        let waiting = row(.waiting(until: next, after: .response(status: 500)), attempts: 3)
        #expect(waiting.status(now: t0) == "attempt 3 failed (500) — next in 2.4 s")
        #expect(waiting.status(now: t0.addingTimeInterval(1)) == "attempt 3 failed (500) — next in 1.4 s")
        let closed = DeliveryOutcome.failure(TransportFailure(.connectionClosed, "x"))
        let dropped = row(.waiting(until: t0.addingTimeInterval(1), after: closed), attempts: 4)
        #expect(dropped.status(now: t0) == "attempt 4 failed (connection dropped) — next in 1.0 s")
        #expect(row(.handedOff(attempt: 2)).status(now: t0) == "handed to iOS (attempt 2)")
        let delivered = row(.delivered, attempts: 5, changedAt: t0.addingTimeInterval(7.1))
        #expect(delivered.status(now: t0) == "delivered after 5 attempts (7.1 s)")
        #expect(row(.abandoned(reason: .clientError(status: 400))).status(now: t0)
                == "abandoned: HTTP 400 is a client error (policy gives up on 4xx)")
        #expect(row(.cancelled).status(now: t0) == "cancelled")
    }

    @Test func aMessageFromAnEarlierRunIsMarkedResumedWithItsFailureUnknown() {
        let status = MessageStatus(
            id: ids.next(), state: .waiting(until: t0.addingTimeInterval(5), after: nil), attempts: 2,
            body: Data("raw bytes".utf8), sentAt: t0.addingTimeInterval(-60))
        let row = MessageRow(status, launchedAt: t0)
        #expect(row.resumed && row.text == "raw bytes")
        #expect(row.status(now: t0) == "attempt 2 failed (before restart) — next in 5.0 s")
    }

    @Test func aRefusedSendIsShownAsANotice() {
        var m = SampleViewModel(server: server)
        m.sendFailed("storageFull: disk full")
        #expect(m.notice == "storageFull: disk full")
    }

    @Test func theServerStatusFollowsTheDestinations() {
        #expect(MessageRow.serverStatus([]) == nil)
        let origin = URL(string: "http://127.0.0.1:8080")!
        let down = DestinationStatus(origin: origin, isDown: true, since: t0, consecutiveFailures: 5)
        #expect(MessageRow.serverStatus([down])
                == "server down (5 failures in a row at http://127.0.0.1:8080): messages wait, one probe at a time")
        let back = DestinationStatus(origin: origin, isDown: false, since: t0, consecutiveFailures: 0)
        #expect(MessageRow.serverStatus([back]) == "server back (http://127.0.0.1:8080): waiting messages resumed")
    }
}

@Suite struct KeyDecoderTests {
    @Test func bytesBecomeKeys() {
        var d = KeyDecoder()
        #expect(d.decode(Array("hi".utf8) + [9, 13, 127, 3])
                == [.character("h"), .character("i"), .tab, .enter, .backspace, .interrupt])
        #expect(d.decode([27, 91, 65]) == [], "arrow keys are swallowed")
        #expect(d.decode([27, 91, 90]) == [.tab], "Shift-Tab moves focus")
        #expect(d.decode(Array("é".utf8).prefix(1).map { $0 }) == [], "half a character waits")
        #expect(d.decode(Array(Array("é".utf8).suffix(1))) == [.character("é")])
    }
}

@Suite struct ScreenRendererTests {
    func render(_ m: SampleViewModel, rows: [MessageRow] = [], width: Int = 80, height: Int = 12) -> [String] {
        ScreenRenderer(width: width, height: height, styled: false, logDirectory: "/data/log",
                       serverDescription: "http://127.0.0.1:18787/messages")
            .lines(for: m, rows: rows, serverStatus: nil, pendingCount: rows.count, now: t0)
    }

    func row(_ text: String, _ state: MessageStatus.State, attempts: Int = 0) -> MessageRow {
        MessageRow(
            MessageStatus(id: ids.next(), state: state, attempts: attempts, body: Data(text.utf8), sentAt: t0),
            launchedAt: t0)
    }

    @Test func theScreenShowsFieldButtonRowsAndStatusLine() {
        var m = SampleViewModel(server: server)
        for c in "typing" { _ = m.handle(.character(c)) }
        let next = t0.addingTimeInterval(2.4)
        let failed = row("hello", .waiting(until: next, after: .response(status: 500)), attempts: 3)
        let lines = render(m, rows: [failed])
        #expect(lines.count == 12)
        #expect(lines[2].contains("│typing_") && lines[2].contains("[ Send ]"))
        #expect(lines.contains { $0.contains("hello") && $0.contains("attempt 3 failed (500) — next in 2.4 s") })
        #expect(lines[10].contains("log: /data/log · 1 pending · server: http://127.0.0.1:18787/messages"))
        #expect(lines.allSatisfy { $0.count <= 80 })
    }

    @Test func aNarrowOrShortTerminalStillFits() {
        let m = SampleViewModel(server: server)
        let rows = (0..<30).map { row("message \($0)", .queued) }
        for (w, h) in [(20, 8), (40, 10), (200, 50)] {
            let lines = render(m, rows: rows, width: w, height: h)
            #expect(lines.count == max(8, h))
            #expect(lines.allSatisfy { $0.count <= max(20, w) }, "\(w)x\(h)")
        }
    }

    @Test func theServerChangesOnlyWhenAnotherIsApplied() {
        var m = SampleViewModel(server: server)
        #expect(m.serverText == server.absoluteString)
        m.setServerText("  http://192.168.1.20:18787/messages \n")
        #expect(m.server == server, "typing alone changes nothing")
        let changed = m.applyServerText()
        #expect(changed)
        #expect(m.server.absoluteString == "http://192.168.1.20:18787/messages")
        #expect(m.serverText == "http://192.168.1.20:18787/messages", "the field shows what was applied")
        let changedAgain = m.applyServerText()
        #expect(!changedAgain, "the same server again is no change")
    }

    @Test(arguments: ["", "challenge.ronash.co/x", "ftp://example.com/x", "https://", "mailto:a@b.c", "not a url"])
    func aServerThatIsNotAnHTTPURLIsRefusedWithANotice(_ typed: String) {
        var m = SampleViewModel(server: URL(string: "http://127.0.0.1:18787/messages")!)
        m.setServerText(typed)
        let refused = !m.applyServerText()
        #expect(refused)
        #expect(m.server.absoluteString == "http://127.0.0.1:18787/messages", "the server stays as it was")
        #expect(m.notice?.hasPrefix("not a server URL") == true)
        m.setServerText("https://example.com/inbox")
        let applied = m.applyServerText()
        #expect(applied)
        #expect(m.notice == nil, "a good URL clears the notice")
    }

    @Test func onlyAWaitingRowCountsDown() {
        #expect(!row("a", .queued).isCountingDown)
        #expect(row("a", .waiting(until: t0.addingTimeInterval(2), after: .response(status: 500))).isCountingDown)
        #expect(!row("a", .delivered, attempts: 2).isCountingDown)
    }
}
