// The storage types an app names (Schema, Value, CairnError, StoreOptions, the file
// systems…) come with `import Cairn`; their internals are `package` and stay hidden.
@_exported import CairnStorage
