import Foundation
import Testing
@testable import Cairn
@testable import CairnStorage

final class Playlist: ManagedObject {
    @Attribute var name: String = ""
    /// Many-to-many with `Song.playlists`.
    @ToMany(inverse: "playlists") var songs: [Song]
    /// No inverse: a deleted song stays in the stored list and is left out when read.
    @ToMany var favorites: [Song]
}

final class Song: ManagedObject {
    @Attribute var title: String = ""
    @ToMany(inverse: "songs") var playlists: [Playlist]
    @ToOne(inverse: "tracks") var album: Album?
}

final class Album: ManagedObject {
    @Attribute var title: String = ""
    @ToMany(inverse: "album", deleteRule: .nullify) var tracks: [Song]
}

/// A context keeps long to-many lists as objects between reads, and an edit in place
/// (`album.tracks.append(song)`) changes the kept list (Context+RelatedLists.swift). Every
/// read must still be what reading the IDs anew gives.
@Suite struct RelatedListTests {
    static func model() throws -> Model { try Model(Playlist.self, Song.self, Album.self) }

    /// A new album in `context` with `count` new songs appended in place, one by one (so
    /// the context keeps the list from 16 on).
    static func album(appending count: Int, in context: Context) -> Album {
        let album = Album(context: context)
        for index in 0..<count {
            let song = Song(context: context)
            song.title = "song \(index)"
            album.tracks.append(song)
        }
        return album
    }

    /// What a read of `slot` must give: the registered object of every ID of the list that
    /// exists, in order, read with no kept list (each object registered already is the
    /// one read).
    static func expected(_ owner: ManagedObject, slot: Int, in context: Context) -> [ObjectIdentifier] {
        context.willRead(owner)
        return owner.values[slot].referencedIDs.compactMap { raw in
            guard let object = context.registered[RecordID(rawValue: raw)] else { return nil }
            if object.isFault { context.willRead(object) }
            return object.exists ? ObjectIdentifier(object) : nil
        }
    }

    /// The slot of the relationship `name` of `object`'s entity.
    static func slot(_ object: ManagedObject, _ name: String) -> Int {
        object.entity.attributes.count + (object.entity.relationships.firstIndex { $0.name == name } ?? -1)
    }

    static func checkLists(_ context: Context, _ albums: [Album], _ playlists: [Playlist], step: Int) {
        for album in albums where album.context === context && album.exists {
            let read = album.tracks
            #expect(read.map(ObjectIdentifier.init) == expected(album, slot: slot(album, "tracks"), in: context),
                    "step \(step): \(album.title).tracks")
            for song in read { #expect(song.album === album, "step \(step): a track of \(album.title) names another album") }
        }
        for playlist in playlists where playlist.context === context && playlist.exists {
            #expect(playlist.songs.map(ObjectIdentifier.init) == expected(playlist, slot: slot(playlist, "songs"), in: context),
                    "step \(step): \(playlist.name).songs")
            #expect(playlist.favorites.map(ObjectIdentifier.init) == expected(playlist, slot: slot(playlist, "favorites"), in: context),
                    "step \(step): \(playlist.name).favorites")
            for song in playlist.songs { #expect(song.playlists.contains { $0 === playlist }, "step \(step): \(playlist.name) not in its song's playlists") }
        }
    }

    /// Random edits of long lists through every path (appends in place, sets, `$` edits,
    /// inverses, deletes, undo and redo, rollback, refresh, saves, another context's saves
    /// merged in, a child's saves, reset): after every step every list reads as its IDs
    /// do, and at the end the store holds what the context last read.
    @Test(arguments: [1, 2, 3] as [UInt64])
    func readsEqualTheIDsAfterRandomEdits(seed: UInt64) throws {
        let stack = try Stack(model: try Self.model())
        let context = stack.context()
        var random = SplitMix64(seed: seed)
        var albums: [Album] = [], playlists: [Playlist] = [], songs: [Song] = []
        for index in 0..<4 {
            let album = Album(context: context)
            album.title = "album \(index)"
            albums.append(album)
            let playlist = Playlist(context: context)
            playlist.name = "playlist \(index)"
            playlists.append(playlist)
        }
        for index in 0..<200 {
            let song = Song(context: context)
            song.title = "song \(index)"
            songs.append(song)
            albums[index % 4].tracks.append(song)
            if index % 3 == 0 { playlists[index % 4].songs.append(song) }
            if index % 2 == 0 { playlists[(index + 1) % 4].favorites.append(song) }
        }
        try context.save()

        func live<T: ManagedObject>(_ objects: [T]) -> [T] { objects.filter { $0.context === context && $0.exists } }
        func refetch() throws {
            albums = try context.fetch(FetchQuery(Album.self))
            playlists = try context.fetch(FetchQuery(Playlist.self))
            songs = try context.fetch(FetchQuery(Song.self))
        }
        var newSongs = 0
        var cleanUpFavorites = false
        // An undo can put back a list that names a song deleted since (elsewhere, or here
        // before a list without an inverse was cleaned up): the save fails, with a clear
        // error, and the context rolls back to what it last saved.
        var failedSaves = 0
        func save() {
            do { try context.save() } catch {
                failedSaves += 1
                context.rollback()
            }
        }
        for step in 0..<400 {
            let liveAlbums = live(albums), livePlaylists = live(playlists), liveSongs = live(songs)
            guard let album = liveAlbums.randomElement(using: &random), let playlist = livePlaylists.randomElement(using: &random),
                  let song = liveSongs.randomElement(using: &random) else { break }
            if cleanUpFavorites {
                // A list with no inverse keeps a deleted target's ID (a read leaves it out),
                // and a save of it would fail: set to what it reads, as an app must.
                for playlist in live(playlists) { playlist.favorites = playlist.favorites }
                cleanUpFavorites = false
            }
            switch random.next() % 20 {
            case 0, 1:  // a new song appended in place
                let new = Song(context: context)
                new.title = "new \(newSongs)"
                newSongs += 1
                songs.append(new)
                album.tracks.append(new)
            case 2, 3: album.tracks.append(song)                       // moved from its album, or already there
            case 4: playlist.songs.append(song)
            case 5: playlist.favorites.append(song)
            case 6: if !album.tracks.isEmpty { album.tracks.remove(at: Int(random.next() % UInt64(album.tracks.count))) }
            case 7: album.tracks.reverse()
            case 8: album.tracks = album.tracks + [song]              // a set, not in place
            case 9: album.$tracks.append(song)
            case 10: playlist.$songs.remove(song)
            case 11: song.album = random.next() % 4 == 0 ? nil : album
            case 12:
                context.delete(song)
                cleanUpFavorites = true
            case 13: context.undo()
            case 14: context.redo()
            case 15:
                if random.next() % 4 == 0 { context.rollback() } else { save() }
            case 16:
                // (Dropping an object's unsaved relationship changes leaves the other ends'
                // inverses as they are, as in Core Data: only an unchanged one is refreshed so.)
                let object: ManagedObject = random.next() % 2 == 0 ? album : song
                context.refresh(object, mergeChanges: object.hasChanges || random.next() % 2 == 0)
            case 17:  // another context's save, merged in
                save()
                let other = stack.context()
                let theirs = try #require(try other.existingObject(Album.self, with: album.objectID))
                let theirSong = try #require(try other.existingObject(Song.self, with: song.objectID))
                if random.next() % 3 == 0 {
                    other.delete(theirSong)
                    cleanUpFavorites = true
                } else {
                    theirs.tracks.append(theirSong)
                }
                // (The delete fails where it changes a playlist whose favorites, a list
                // without an inverse, name the song: the stored list keeps it.)
                do { try other.save() } catch { failedSaves += 1 }
                context.processExternalChanges()
            case 18:  // a child's edits, saved into this context
                let child = Context(parent: context)
                let theirs = try #require(try child.existingObject(Album.self, with: album.objectID))
                let fresh = Song(context: child)
                fresh.title = "child \(step)"
                theirs.tracks.append(fresh)
                theirs.tracks.append(try #require(try child.existingObject(Song.self, with: song.objectID)))
                try child.save()
                try refetch()
            default:
                if random.next() % 8 == 0 {
                    save()
                    context.reset()
                    try refetch()
                } else {
                    _ = (album.tracks, playlist.songs)
                }
            }
            Self.checkLists(context, albums, playlists, step: step)
        }
        save()
        #expect(failedSaves < 20, "\(failedSaves) saves failed")

        // The store holds what the context reads.
        let reader = stack.context()
        for album in live(albums) {
            let stored = try #require(try reader.existingObject(Album.self, with: album.objectID))
            #expect(stored.tracks.map(\.objectID) == album.tracks.map(\.objectID), "\(album.title) in the store")
        }
        for playlist in live(playlists) {
            let stored = try #require(try reader.existingObject(Playlist.self, with: playlist.objectID))
            #expect(stored.songs.map(\.objectID) == playlist.songs.map(\.objectID), "\(playlist.name) in the store")
            #expect(stored.favorites.map(\.objectID) == playlist.favorites.map(\.objectID), "\(playlist.name) favorites in the store")
        }
    }

    /// Appends in place to a long list keep the list they made: after 40 appends the
    /// context holds the list as read (the 40 songs, current), each song names the album,
    /// and the store agrees. Without the kept list each append read and compared the whole
    /// list (10,000 appends: 5.3 s; with it 0.03 s, /tmp/harness).
    @Test func appendsInPlaceKeepTheListTheyMake() throws {
        let stack = try Stack(model: try Self.model())
        let context = stack.context()
        let album = Album(context: context)
        var added: [Song] = []
        for index in 0..<40 {
            let song = Song(context: context)
            song.title = "song \(index)"
            album.tracks.append(song)
            album.tracks.append(song)  // held already: no change
            added.append(song)
        }
        let kept = try #require(context.relatedLists[RelatedListKey(owner: ObjectIdentifier(album), slot: Self.slot(album, "tracks"))])
        #expect(kept.complete && kept.stamp == album.valuesStamp)
        #expect(kept.objects.map(ObjectIdentifier.init) == added.map(ObjectIdentifier.init))
        #expect(album.tracks.map(ObjectIdentifier.init) == added.map(ObjectIdentifier.init))
        for song in added { #expect(song.album === album) }

        // A song deleted lets go of the kept lists; the read leaves it out.
        context.delete(added[7])
        #expect(context.relatedLists.isEmpty)
        #expect(album.tracks.count == 39 && !album.tracks.contains { $0 === added[7] })
        try context.save()
        let reader = stack.context()
        let stored = try #require(try reader.existingObject(Album.self, with: album.objectID))
        #expect(stored.tracks.map(\.objectID) == album.tracks.map(\.objectID))
    }

    /// A kept list (20 tracks) and a fault for a song deleted since: appending the fault in
    /// place loads it for its inverse, which finds it gone. The list read after leaves it
    /// out, as a read with nothing kept does. (Found by review: the edit kept the list with
    /// the fault in it.)
    @Test func anAppendedFaultFoundGoneIsLeftOut() throws {
        let stack = try Stack(model: try Self.model())
        let context = stack.context()
        let album = Self.album(appending: 20, in: context)
        let doomed = Song(context: context)
        try context.save()
        let id = doomed.objectID
        context.delete(doomed)
        try context.save()
        let ghost = try #require(context.object(with: id) as? Song)  // a fault; its record is gone
        album.tracks.append(ghost)
        #expect(album.tracks.count == 20)
        #expect(!album.tracks.contains { $0 === ghost })
        album.tracks.append(Song(context: context))
        #expect(album.tracks.count == 21 && !album.tracks.contains { $0 === ghost })
    }

    /// Another context's save turns a kept track back into a fault (merged in), then deletes
    /// it (not merged in yet): the list read loads the fault, finds it gone and leaves it
    /// out, kept list or not. (Found by review: the kept list still held it.)
    @Test func aTrackFaultedByAMergeIsReadAgain() throws {
        let stack = try Stack(model: try Self.model())
        let context = stack.context()
        let album = Self.album(appending: 20, in: context)
        try context.save()
        let other = stack.context()
        let theirs = try #require(try other.existingObject(Song.self, with: album.tracks[0].objectID))
        theirs.title = "renamed"
        try other.save()
        context.processExternalChanges()  // tracks[0] is a fault again
        other.delete(theirs)
        try other.save()                  // not merged in here
        #expect(album.tracks.count == 19)
    }

    /// A kept list and its shadow (the set and addresses edits keep) carried across edits
    /// that add nothing, add a target twice, add some held and some new, set the whole list,
    /// and insert a detached song that its own relationship puts in the list: every read
    /// equals the IDs after each. (The last was found by review: the edit appended the song
    /// its insert had already put in the list, a second time.)
    @Test func aKeptListFollowsEveryKindOfAppend() throws {
        let stack = try Stack(model: try Self.model())
        let context = stack.context()
        let album = Album()
        let detached = Song()
        detached.title = "detached"
        detached.album = album                 // neither in a context: remembered, linked on insert
        context.insert(album)
        let slot = Self.slot(album, "tracks")
        func check(_ step: String) {
            #expect(album.tracks.map(ObjectIdentifier.init) == Self.expected(album, slot: slot, in: context), "\(step)")
            #expect(Set(album.values[slot].referencedIDs).count == album.values[slot].referencedIDs.count, "\(step): an ID twice")
        }
        func song(_ title: String) -> Song {
            let song = Song(context: context)
            song.title = title
            return song
        }
        for index in 0..<20 { album.tracks.append(song("song \(index)")) }
        check("twenty appends")
        let held = album.tracks[3]
        album.tracks.append(held)
        check("a held one appended")
        album.tracks.append(song("new"))
        check("then a new one")
        let twice = song("twice")
        album.tracks.append(contentsOf: [twice, twice])
        check("one appended twice in one edit")
        album.tracks.append(contentsOf: [album.tracks[0], song("mixed")])
        check("a held one and a new one in one edit")
        album.tracks = album.tracks + [song("set")]
        check("a set of the list plus one")
        #expect(detached.context == nil)
        album.tracks.append(detached)          // inserted by the append
        check("a detached song its insert puts in the list")
        #expect(album.tracks.filter { $0 === detached }.count == 1)
        album.tracks.append(song("after"))
        check("an append after")
        try context.save()
        let reader = stack.context()
        let stored = try #require(try reader.existingObject(Album.self, with: album.objectID))
        #expect(stored.tracks.map(\.objectID) == album.tracks.map(\.objectID))
    }
}
