"""First fit decreasing: largest items first, each into the first bin with room."""


def pack(items, capacity):
    bins, loads = [], []
    for index in sorted(range(len(items)), key=lambda i: (-items[i], i)):
        for number, load in enumerate(loads):
            if load + items[index] <= capacity:
                bins[number].append(index)
                loads[number] += items[index]
                break
        else:
            bins.append([index])
            loads.append(items[index])
    return bins
