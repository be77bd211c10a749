import Cairn
func f(_ store: Store) {}
