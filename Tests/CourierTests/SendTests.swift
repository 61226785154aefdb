@testable @_spi(CourierTesting) import CourierKit
import CourierLog
import CourierLogTesting
import CourierTesting
import Foundation
import Testing

@Suite struct SendValidationTests {
    func records(_ dir: TemporaryDirectory) throws -> Int {
        var n = 0
        _ = try LogReader(directory: dir.url.path).read { _ in n += 1 }
        return n
    }

    @Test func valuesJSONCannotHoldAreRefusedBeforeAnythingIsWritten() async throws {
        let dir = TemporaryDirectory()
        let courier = try Courier(
            directory: dir.url, configuration: testConfiguration(clock: ManualClock(), transport: ScriptedTransport()))
        final class Custom {}
        let bad: [[String: Any]] = [
            ["when": Date()], ["blob": Data([1])], ["x": Custom()], ["nan": Double.nan], ["inf": Double.infinity],
            ["deep": ["list": [1, 2, Float.nan]]], ["n": NSNumber(value: Double.infinity)],
        ]
        for value in bad {
            #expect { try courier.send(value, to: inbox) } throws: { ($0 as? CourierError)?.code == .invalidJSON }
        }
        struct WithNaN: Encodable { var x = Double.nan }
        #expect { try courier.send(WithNaN(), to: inbox) } throws: { ($0 as? CourierError)?.code == .invalidJSON }
        #expect(try records(dir) == 0)
        #expect(courier.pendingCount == 0)
        await courier.close()
    }

    @Test func headersThatCannotBeSentAreRefused() async throws {
        let dir = TemporaryDirectory()
        let courier = try Courier(
            directory: dir.url, configuration: testConfiguration(clock: ManualClock(), transport: ScriptedTransport()))
        let many = Dictionary(uniqueKeysWithValues: (0..<201).map { ("X-\($0)", "v") })
        for headers in [many, ["": "v"], ["X-Bad": "a\r\nInjected: yes"],
                        ["X-Long": String(repeating: "v", count: 9000)]] {
            #expect { try courier.send(["a": 1], to: inbox, headers: headers) }
                throws: { ($0 as? CourierError)?.code == .invalidHeaders }
        }
        #expect(try records(dir) == 0)
        await courier.close()
    }

    @Test func nonHTTPURLsAndOversizedBodiesAreRefused() async throws {
        let dir = TemporaryDirectory()
        var config = testConfiguration(clock: ManualClock(), transport: ScriptedTransport())
        config.maximumMessageBytes = 100
        let courier = try Courier(directory: dir.url, configuration: config)
        for url in ["ftp://example.com/x", "file:///etc/passwd", "mailto:a@b.c", "https:///nohost"] {
            #expect { try courier.send(["a": 1], to: URL(string: url)!) }
                throws: { ($0 as? CourierError)?.code == .invalidURL }
        }
        #expect { try courier.send(["a": String(repeating: "x", count: 200)], to: inbox) } throws: {
            ($0 as? CourierError)?.code == .messageTooLarge
        }
        #expect { try courier.send(data: Data(count: 101), contentType: "application/octet-stream", to: inbox) }
            throws: { ($0 as? CourierError)?.code == .messageTooLarge }
        #expect(try records(dir) == 0)
        await courier.close()
    }

    @Test func encodableValuesAndRawDataAreSentAsGiven() async throws {
        let dir = TemporaryDirectory()
        let transport = ScriptedTransport()
        let courier = try Courier(directory: dir.url,
                                  configuration: testConfiguration(clock: ManualClock(), transport: transport))
        struct Note: Encodable { var text: String; var n: Int }
        let a = try courier.send(Note(text: "hi", n: 2), to: inbox)
        let b = try courier.send(data: Data("plain".utf8), contentType: "text/plain", to: inbox)
        try await courier.delivered(a)
        try await courier.delivered(b)
        let bodies = transport.requests.map { String(decoding: $0.body, as: UTF8.self) }
        #expect(Set(bodies) == [#"{"n":2,"text":"hi"}"#, "plain"])
        #expect(transport.requests.first { $0.messageID == b }?.headers["Content-Type"] == "text/plain")
        await courier.close()
    }

    @Test func theStorageLimitIsATypedErrorAndDropsNothing() async throws {
        let dir = TemporaryDirectory()
        let transport = ScriptedTransport()
        transport.holdResponses = true
        var config = testConfiguration(clock: ManualClock(), transport: transport)
        config.useSmallestSegments()
        config.maximumStorageBytes = 8192
        let courier = try Courier(directory: dir.url, configuration: config)
        var sent = 0
        do {
            for i in 0..<100 {
                try courier.send(["n": i, "pad": String(repeating: "x", count: 50)], to: inbox); sent += 1
            }
            Issue.record("the limit was never reached")
        } catch {
            #expect(error.code == .storageFull)
        }
        #expect(sent > 5 && courier.pendingCount == sent)
        await courier.close()
    }

    @Test func aDirectoryOpenElsewhereIsRefused() async throws {
        let dir = TemporaryDirectory()
        let first = try Courier(directory: dir.url,
                                configuration: testConfiguration(clock: ManualClock(), transport: ScriptedTransport()))
        #expect {
            try Courier(directory: dir.url,
                        configuration: testConfiguration(clock: ManualClock(), transport: ScriptedTransport()))
        } throws: {
            ($0 as? CourierError)?.code == .directoryLocked
        }
        await first.close()
        let second = try Courier(directory: dir.url,
                                 configuration: testConfiguration(clock: ManualClock(), transport: ScriptedTransport()))
        await second.close()
    }

    @Test func sendAfterCloseThrowsClosed() async throws {
        let dir = TemporaryDirectory()
        let courier = try Courier(
            directory: dir.url, configuration: testConfiguration(clock: ManualClock(), transport: ScriptedTransport()))
        await courier.close()
        #expect { try courier.send(["a": 1], to: inbox) } throws: { ($0 as? CourierError)?.code == .closed }
        await #expect { try await courier.delivered(MessageID()) }
            throws: { ($0 as? CourierError)?.code == .unknownMessage }
    }
}

@Suite struct RestartTests {
    @Test func attemptCountsAndDueTimesSurviveARestart() async throws {
        let dir = TemporaryDirectory()
        let clock = ManualClock()
        let failing = ScriptedTransport { _ in .response(status: 500) }
        let first = try Courier(directory: dir.url, configuration: testConfiguration(clock: clock, transport: failing))
        let id = try first.send(["text": "hi"], to: inbox)
        await first.settle()
        await clock.advance(by: .seconds(1))
        await first.settle()
        #expect(failing.requests.map(\.attempt) == [1, 2])
        await first.close()

        // Reopen 1 s after attempt 2 failed: attempt 3 is due 2 s after it.
        let clock2 = ManualClock()
        let working = ScriptedTransport()
        var config = testConfiguration(clock: clock2, transport: working)
        config.now = { wallStart.addingTimeInterval(2) }
        let second = try Courier(directory: dir.url, configuration: config)
        #expect(second.pendingCount == 1)
        await second.settle()
        #expect(working.requests.isEmpty, "not due yet")
        await clock2.advance(by: .seconds(1))
        try await second.delivered(id)
        #expect(working.requests.map(\.attempt) == [3])
        await second.close()
    }

    @Test func aMessageInFlightAtCloseIsPendingAgainAfterReopen() async throws {
        let dir = TemporaryDirectory()
        let held = ScriptedTransport()
        held.holdResponses = true
        let first = try Courier(directory: dir.url,
                                configuration: testConfiguration(clock: ManualClock(), transport: held))
        let id = try first.send(["text": "hi"], to: inbox)
        await held.waitForRequests(1)
        await first.close()
        let working = ScriptedTransport()
        let second = try Courier(directory: dir.url,
                                 configuration: testConfiguration(clock: ManualClock(), transport: working))
        try await second.delivered(id)
        #expect(working.requests.map(\.attempt) == [1], "a cancelled attempt is not counted")
        await second.close()
    }

    /// A scripted run, then the log cut after each record in turn: the courier opened on the
    /// cut log holds exactly the projection of the records before the cut.
    @Test func theLogCutAtEveryRecordBoundaryReplaysToTheProjectionOfWhatSurvived() async throws {
        let dir = TemporaryDirectory()
        let clock = ManualClock()
        let transport = ScriptedTransport { r in
            let n = Int(r.messageID.description.suffix(2), radix: 16)!
            // 500, not 503: a 503 amid 2xx is load, retried at the destination's pace, one start
            // per pace interval, and these 10 s steps of virtual time would take minutes.
            return r.attempt < 1 + n % 3 ? .response(status: 500) : .response(status: 200)
        }
        var config = testConfiguration(clock: clock, transport: transport)
        config.maximumConcurrentDeliveries = 2
        let courier = try Courier(directory: dir.url, configuration: config)
        for i in 0..<8 { try courier.send(["n": i], to: inbox) }
        for _ in 0..<6 { await courier.settle(); await clock.advance(by: .seconds(10)) }
        await courier.waitUntilIdle()
        await courier.close()

        var records: [LogRecord] = []
        _ = try LogReader(directory: dir.url.path).read { records.append($0.record()) }
        #expect(records.count > 20)
        let segment = dir.url.appendingPathComponent(records[0].segment)
        let bytes = try Data(contentsOf: segment)
        for cut in 0...records.count {
            let copy = TemporaryDirectory()
            try FileManager.default.createDirectory(at: copy.url, withIntermediateDirectories: true)
            let end = cut == 0 ? 40 : records[cut - 1].address.end
            try bytes.prefix(end).write(to: copy.url.appendingPathComponent(records[0].segment))
            var expected = ReferenceProjection()
            for r in records.prefix(cut) { expected.apply(Event.decode(kind: r.kind, body: r.body)!) }
            let parked = ScriptedTransport()
            parked.holdResponses = true
            var reopen = testConfiguration(clock: ManualClock(), transport: parked)
            reopen.now = { wallStart.addingTimeInterval(-60) }  // nothing is due: the projection stays as replayed
            let replayed = try Courier(directory: copy.url, configuration: reopen)
            #expect(replayed.scheduledStates == expected.states, "cut after \(cut) records")
            await replayed.close()
        }
    }
}

@Suite struct JSONWriterTests {
    @Test func outputIsExactForTypicalValues() throws {
        let body = try JSONBody.serialize([
            "text": "hi \"there\"\n\\ /ünï", "n": 42, "neg": -7, "pi": 3.25, "big": 1e20, "tiny": 1e-5, "whole": 3.0,
            "yes": true, "no": false, "none": NSNull(), "list": [1, "two", [3]], "nested": ["b": 2, "a": 1],
            "ctl": "\u{01}",
        ])
        #expect(String(decoding: body, as: UTF8.self)
                == #"{"big":1e+20,"ctl":"\u0001","list":[1,"two",[3]],"n":42,"neg":-7,"nested":{"a":1,"b":2},"# +
                   #""no":false,"none":null,"pi":3.25,"text":"hi \"there\"\n\\ /ünï","# +
                   #""tiny":1e-05,"whole":3,"yes":true}"#)
    }

    @Test func keysAreSortedByTheirUTF8Bytes() throws {
        let body = try JSONBody.serialize(["b": 1, "a": 2, "é": 3, "Z": 4, "ab": 5, "": 6, "😀": 8])
        #expect(String(decoding: body, as: UTF8.self) == #"{"":6,"Z":4,"a":2,"ab":5,"b":1,"é":3,"😀":8}"#)
    }

    @Test func foundationReadsBackWhatWasWritten() throws {
        let values: [[String: Any]] = [
            ["a": Int64.max, "b": UInt64.max, "c": Int8.min, "d": Float(0.5), "e": -0.0, "f": 123_456_789.125],
            [
                "nsnumbers": [
                    NSNumber(value: true), NSNumber(value: 7), NSNumber(value: 2.5), NSNumber(value: UInt64.max),
                ],
            ],
            ["emoji": "👩‍💻", "quote": "\"", "tab": "\t", "empty": "", "deep": [["x": [["y": [1]]]]]],
        ]
        for value in values {
            let body = try JSONBody.serialize(value)
            let parsed = try JSONSerialization.jsonObject(with: Data(body)) as? NSDictionary
            #expect(parsed == (value as NSDictionary), "\(String(decoding: body, as: UTF8.self))")
        }
    }

    @Test func cyclesAndAbsurdNestingAreRefusedNotRecursedForever() {
        var deep: Any = 1
        for _ in 0..<200 { deep = [deep] }
        #expect { try JSONBody.serialize(["deep": deep]) } throws: { ($0 as? CourierError)?.code == .invalidJSON }
    }
}

@Suite struct StorageFaultTests {
    /// Reopens `/c` on `fs` a minute "earlier", so nothing is due and the state stays as replayed.
    func reopenIdle(_ fs: SimulatedFileSystem) throws -> Courier {
        var reopen = testConfiguration(clock: ManualClock(), transport: ScriptedTransport())
        reopen.fileSystem = fs
        reopen.now = { wallStart.addingTimeInterval(-60) }
        return try Courier(directory: URL(fileURLWithPath: "/c"), configuration: reopen)
    }

    @Test func aFullDiskIsStorageFullAndQueuedMessagesSurvive() async throws {
        let fs = SimulatedFileSystem()
        let transport = ScriptedTransport()
        transport.holdResponses = true
        var config = testConfiguration(clock: ManualClock(), transport: transport)
        config.fileSystem = fs
        let courier = try Courier(directory: URL(fileURLWithPath: "/c"), configuration: config)
        let kept = try (0..<3).map { try courier.send(["n": $0], to: inbox) }
        fs.capacityBytes = fs.allPaths().compactMap { fs.contents(of: $0)?.count }.reduce(0, +) + 50
        #expect { try courier.send(["n": 99], to: inbox) } throws: { ($0 as? CourierError)?.code == .storageFull }
        #expect(courier.pendingCount == 3)
        fs.capacityBytes = nil
        let later = try courier.send(["n": 100], to: inbox)
        await courier.close()
        let again = try reopenIdle(fs)
        #expect(Set(again.scheduledStates.keys) == Set(kept + [later]))
        await again.close()
    }

    @Test func alwaysDurabilitySurvivesAPowerLossRightAfterSend() async throws {
        let fs = SimulatedFileSystem()
        let transport = ScriptedTransport()
        transport.holdResponses = true
        var config = testConfiguration(clock: ManualClock(), transport: transport)
        config.fileSystem = fs
        config.durability = .always
        let courier = try Courier(directory: URL(fileURLWithPath: "/c"), configuration: config)
        let id = try courier.send(["n": 1], to: inbox)
        fs.crash()  // power loss: everything not fsynced is gone
        let again = try reopenIdle(fs)
        #expect(Array(again.scheduledStates.keys) == [id])
        await again.close()
        _ = courier
    }
}

/// `send` of an `Encodable` with the app's own encoder: its conventions reach the server.
@Suite struct EncoderTests {
    struct Note: Encodable {
        let noteText: String
        let sentAt: Date
    }

    @Test func theAppsEncoderShapesTheBody() async throws {
        let scratch = TemporaryDirectory()
        let transport = ScriptedTransport()
        let courier = try Courier(
            directory: scratch.url, configuration: testConfiguration(clock: ManualClock(), transport: transport))
        let encoder = JSONEncoder()
        encoder.keyEncodingStrategy = .convertToSnakeCase
        encoder.dateEncodingStrategy = .iso8601
        let id = try courier.send(Note(noteText: "hi", sentAt: wallStart), to: inbox, encoder: encoder)
        try await courier.delivered(id)
        let body = try #require(transport.requests.first?.body)
        let object = try #require(try JSONSerialization.jsonObject(with: body) as? [String: String])
        #expect(object == ["note_text": "hi", "sent_at": "2025-11-21T16:00:00Z"])
        let plain = try courier.send(Note(noteText: "hi", sentAt: wallStart), to: inbox)
        try await courier.delivered(plain)
        #expect(String(decoding: transport.requests[1].body, as: UTF8.self).contains("\"noteText\""))
        await courier.close()
    }
}
