"""Nearest centroid: each digit's mean image, and every test image gets
the digit whose mean is closest (squared distance). About 0.8 accuracy
(a nearest neighbour does better)."""


def predict(train_x, train_y, test_x):
    sums, counts = {}, {}
    for pixels, label in zip(train_x, train_y):
        total = sums.setdefault(label, [0.0] * len(pixels))
        for index, value in enumerate(pixels):
            total[index] += value
        counts[label] = counts.get(label, 0) + 1
    centroids = {label: [value / counts[label] for value in total] for label, total in sums.items()}

    def closest(pixels):
        return min(centroids, key=lambda label: sum((a - b) ** 2 for a, b in zip(pixels, centroids[label])))

    return [closest(pixels) for pixels in test_x]
