import CourierKit
import Foundation

// SendingFromAppExtensions.md, compiled for iOS by `make ios-check` (the App Group container
// API is Apple's): see Tests/CourierTests/DocumentationExamples.swift for how the regions reach
// the documents.

enum ExtensionSending {
    static func shareExtensionSends(serverURL: URL, account: String) throws -> MessageID {
        // snippet: extension-send
        let shared = FileManager.default
            .containerURL(forSecurityApplicationGroupIdentifier: "group.com.example.app")!
            .appendingPathComponent("ExtensionOutbox")
        let outbox = try ExtensionOutbox(directory: shared)
        let id = try outbox.send(["text": "hi"], to: serverURL, tags: ["account:\(account)"])
        // snippet end
        return id
    }

    static func appCollects(configuration: inout Courier.Configuration) {
        let shared = FileManager.default
            .containerURL(forSecurityApplicationGroupIdentifier: "group.com.example.app")!
            .appendingPathComponent("ExtensionOutbox")
        // snippet: extension-app
        configuration.extensionOutboxDirectory = shared  // the same folder
        // snippet end
    }
}
