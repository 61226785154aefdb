import CourierKit
import CourierSample
import CourierTesting
import Foundation
import Testing

let t0 = Date(timeIntervalSince1970: 1_763_740_800)
let ids = SequentialMessageIDs()

@Suite struct ViewModelTests {
    func type(_ text: String, into model: inout SampleViewModel) {
        for c in text { _ = model.handle(.character(c)) }
    }

    @Test func typingFillsTheFieldAndBackspaceRemoves() {
        var m = SampleViewModel()
        type("helo", into: &m)
        _ = m.handle(.backspace)
        type("lo", into: &m)
        #expect(m.text == "hello")
    }

    @Test func theButtonIsEnabledOnlyWhenTheFieldHasText() {
        var m = SampleViewModel()
        #expect(!m.isSendEnabled)
        type("   ", into: &m)
        #expect(!m.isSendEnabled, "blanks are not a message")
        #expect(m.handle(.enter) == .none)
        type("x", into: &m)
        #expect(m.isSendEnabled)
    }

    @Test func tabReachesTheButtonAndEnterOrSpaceActivatesIt() {
        var m = SampleViewModel()
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
        var m = SampleViewModel()
        #expect(m.handle(.character("q")) == .none)
        #expect(m.text == "q", "q is just a letter in the field")
        _ = m.handle(.tab)
        #expect(m.handle(.character("q")) == .quit)
        var n = SampleViewModel()
        #expect(n.handle(.interrupt) == .quit)
    }

    @Test func rowsFollowTheLibrarysEvents() {
        var m = SampleViewModel()
        let id = ids.next()
        m.didSend(id, text: "hello", at: t0)
        #expect(m.rows.first?.status(now: t0) == "queued")
        m.apply(.attemptStarted(id, number: 1), at: t0)
        #expect(m.rows.first?.status(now: t0) == "sending (attempt 1)")
        m.apply(
            .failed(id, attempt: 3, outcome: .response(status: 500), nextAttemptAt: t0.addingTimeInterval(2.4)), at: t0)
        #expect(m.rows.first?.status(now: t0) == "attempt 3 failed (500) — next in 2.4 s")
        #expect(m.rows.first?.status(now: t0.addingTimeInterval(1)) == "attempt 3 failed (500) — next in 1.4 s")
        m.apply(.failed(id, attempt: 4, outcome: .failure(TransportFailure(.connectionClosed, "x")),
                        nextAttemptAt: t0.addingTimeInterval(1)), at: t0)
        #expect(m.rows.first?.status(now: t0) == "attempt 4 failed (connection dropped) — next in 1.0 s")
        m.apply(.delivered(id, attempts: 5), at: t0.addingTimeInterval(7.1))
        #expect(m.rows.first?.status(now: t0) == "delivered after 5 attempts (7.1 s)")
        #expect(m.pendingCount == 0)
    }

    @Test func newestMessagesComeFirstAndUnknownEventsAreIgnored() {
        var m = SampleViewModel()
        let a = ids.next(), b = ids.next()
        m.didSend(a, text: "a", at: t0)
        m.didSend(b, text: "b", at: t0)
        m.apply(.delivered(ids.next(), attempts: 1), at: t0)
        #expect(m.rows.map(\.text) == ["b", "a"])
        #expect(m.pendingCount == 2)
    }

    @Test func afterARestartPendingMessagesAppearAsResumed() {
        let a = ids.next(), b = ids.next()
        let url = URL(string: "http://127.0.0.1:1/m")!
        let pending = [
            PendingMessage(id: a, url: url, body: Data(#"{"text":"older"}"#.utf8), attempts: 3, sentAt: t0,
                           nextAttemptAt: t0.addingTimeInterval(4)),
            PendingMessage(id: b, url: url, body: Data(#"{"text":"newer"}"#.utf8), attempts: 0, sentAt: t0,
                           nextAttemptAt: t0),
        ]
        var m = SampleViewModel(pending: pending)
        #expect(m.rows.map(\.text) == ["newer", "older"])
        #expect(m.rows.allSatisfy { $0.resumed })
        #expect(m.rows[1].status(now: t0) == "attempt 3 failed (before restart) — next in 4.0 s")
        m.apply(.delivered(a, attempts: 4), at: t0.addingTimeInterval(10))
        #expect(m.rows[1].status(now: t0) == "delivered after 4 attempts (10.0 s)")
    }

    @Test func aRefusedSendIsShownAsANotice() {
        var m = SampleViewModel()
        m.sendFailed("storageFull: disk full")
        #expect(m.notice == "storageFull: disk full")
    }

    @Test func theServerStatusFollowsDestinationEvents() {
        var m = SampleViewModel()
        #expect(m.serverStatus == nil)
        m.apply(.destinationDown("http://127.0.0.1:8080", consecutiveFailures: 5), at: t0)
        #expect(m.serverStatus
                == "server down (5 failures in a row at http://127.0.0.1:8080): messages wait, one probe at a time")
        m.apply(.destinationRecovered("http://127.0.0.1:8080", downFor: .milliseconds(12_500), released: 42), at: t0)
        #expect(m.serverStatus == "server back (http://127.0.0.1:8080, down 12.5 s): 42 waiting messages resumed")
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
    func render(_ m: SampleViewModel, width: Int = 80, height: Int = 12) -> [String] {
        ScreenRenderer(width: width, height: height, styled: false, logDirectory: "/data/log",
                       serverDescription: "http://127.0.0.1:18787/messages")
            .lines(for: m, now: t0)
    }

    @Test func theScreenShowsFieldButtonRowsAndStatusLine() {
        var m = SampleViewModel()
        let id = ids.next()
        m.didSend(id, text: "hello", at: t0)
        m.apply(
            .failed(id, attempt: 3, outcome: .response(status: 500), nextAttemptAt: t0.addingTimeInterval(2.4)), at: t0)
        for c in "typing" { _ = m.handle(.character(c)) }
        let lines = render(m)
        #expect(lines.count == 12)
        #expect(lines[2].contains("│typing_") && lines[2].contains("[ Send ]"))
        #expect(lines.contains { $0.contains("hello") && $0.contains("attempt 3 failed (500) — next in 2.4 s") })
        #expect(lines[10].contains("log: /data/log · 1 pending · server: http://127.0.0.1:18787/messages"))
        #expect(lines.allSatisfy { $0.count <= 80 })
    }

    @Test func aNarrowOrShortTerminalStillFits() {
        var m = SampleViewModel()
        for i in 0..<30 { m.didSend(ids.next(), text: "message \(i)", at: t0) }
        for (w, h) in [(20, 8), (40, 10), (200, 50)] {
            let lines = render(m, width: w, height: h)
            #expect(lines.count == max(8, h))
            #expect(lines.allSatisfy { $0.count <= max(20, w) }, "\(w)x\(h)")
        }
    }

    @Test func theServerIsTheChallengesUntilAnotherIsApplied() {
        var m = SampleViewModel()
        #expect(m.server.absoluteString == "https://challenge.ronash.co/reliable-messaging")
        #expect(m.serverText == m.server.absoluteString)
        m.setServerText("  http://192.168.1.20:18787/messages \n")
        #expect(m.server == SampleViewModel.challengeServer, "typing alone changes nothing")
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

    @Test func onlyAFailedRowCountsDown() {
        var m = SampleViewModel()
        m.didSend(ids.next(), text: "a", at: t0)
        #expect(m.rows[0].isCountingDown == false, "queued")
        let id = m.rows[0].id
        m.apply(
            .failed(id, attempt: 1, outcome: .response(status: 500), nextAttemptAt: t0.addingTimeInterval(2)), at: t0)
        #expect(m.rows[0].isCountingDown, "next attempt in 2 s")
        m.apply(.delivered(id, attempts: 2), at: t0.addingTimeInterval(3))
        #expect(m.rows[0].isCountingDown == false, "delivered")
    }
}
