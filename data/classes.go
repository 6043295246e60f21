package data

// ClassNames returns the names of a dataset's classes, by label, or nil
// for an unknown dataset.
func ClassNames(dataset string) []string {
	switch dataset {
	case "mnist":
		return []string{"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"}
	case "fashion-mnist":
		return []string{"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"}
	case "cifar10":
		return []string{"airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"}
	}
	return nil
}
